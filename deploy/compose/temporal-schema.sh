#!/bin/sh
# One-shot, in temporalio/admin-tools: Temporal's two databases on the compose PostgreSQL, created if
# missing and brought to the schema of this admin-tools version (which matches the server image's).
# Safe to run again: create and setup-schema leave what exists, update-schema applies only what is missing.
set -eu
: "${SQL_PASSWORD:?set SQL_PASSWORD (the temporal role's password)}"
schemas=/etc/temporal/schema/postgresql/v12

sql_tool() {
    temporal-sql-tool --plugin postgres12 --ep "${POSTGRES_SEEDS:-postgres}" -p "${DB_PORT:-5432}" \
        -u "${POSTGRES_USER:-temporal}" "$@"
}

sql_tool --db temporal create
sql_tool --db temporal setup-schema -v 0.0
sql_tool --db temporal update-schema -d "$schemas/temporal/versioned"

sql_tool --db temporal_visibility create
sql_tool --db temporal_visibility setup-schema -v 0.0
sql_tool --db temporal_visibility update-schema -d "$schemas/visibility/versioned"
echo "temporal-schema: databases temporal and temporal_visibility are current"
