"""Sign-in and accounts: passwords, API keys, single sign-on claims, document access and the audit log;
the ACL manifests that say which principals may read which files of a source."""
