"""IT helpdesk automation: tickets decided from the documents their requester may read, resolutions
and webhook deliveries (docs/helpdesk.md)."""
