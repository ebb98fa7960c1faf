-- placeholder: the daemon work fills this in
CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
