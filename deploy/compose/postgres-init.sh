#!/bin/sh
# Runs once, when the PostgreSQL data volume is new (the postgres image's /docker-entrypoint-initdb.d):
# a role for Temporal, which creates its own two databases (temporal, temporal_visibility), and a role
# and database for the agentrt store. Passwords come from the environment, never from this file.
set -eu
: "${TEMPORAL_DB_PASSWORD:?set TEMPORAL_DB_PASSWORD}"
: "${AGENTRT_DB_PASSWORD:?set AGENTRT_DB_PASSWORD}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    --set=temporal_password="$TEMPORAL_DB_PASSWORD" --set=agentrt_password="$AGENTRT_DB_PASSWORD" <<'SQL'
CREATE ROLE temporal LOGIN CREATEDB PASSWORD :'temporal_password';
CREATE ROLE agentrt LOGIN PASSWORD :'agentrt_password';
CREATE DATABASE agentrt OWNER agentrt;
REVOKE ALL ON DATABASE agentrt FROM PUBLIC;
SQL
