"""What operators run beside the service: health checks of a deployment (`doctor`), backup and restore."""
