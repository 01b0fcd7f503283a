"""Sign-in and accounts: passwords, API keys, single sign-on claims, document access and the audit log."""
