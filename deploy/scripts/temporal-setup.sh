#!/bin/sh
# One-shot setup of the Temporal namespace agentrt is configured for: waits for the server, creates
# the namespace when AGENTRT_NAMESPACE_RETENTION is set and it is missing, then registers the search
# attributes sessions, tasks and graphs write. Safe to run again: creating an attribute that exists
# with the same type is a no-op; one that exists with another type fails, naming it.
#
# Address and namespace come from the agentrt configuration as every agentrt process reads it
# (agentrt.toml, then AGENTRT_TEMPORAL_ADDRESS / AGENTRT_NAMESPACE), and the attributes from the
# installed agentrt, so this registers exactly what the running code writes. TLS or an API key for
# the `temporal` CLI come from its own environment variables (TEMPORAL_TLS_*, TEMPORAL_API_KEY).
#
# Environment: AGENTRT_SETUP_ATTEMPTS (default 60) tries, 2 seconds apart, while the server or a new
# namespace is not ready; AGENTRT_NAMESPACE_RETENTION (a duration such as 30d) to create the namespace.
set -eu

attempts="${AGENTRT_SETUP_ATTEMPTS:-60}"

# First line: address and namespace; then one line per attribute: name and type.
settings=$(python -c 'from agentrt.worker import SEARCH_ATTRIBUTES, AgentrtConfig
config = AgentrtConfig.load()
print(config.temporal_address, config.namespace)
for name, kind in SEARCH_ATTRIBUTES.items():
    print(name, kind)')
target=$(printf '%s\n' "$settings" | head -n 1)
address=${target% *}
namespace=${target#* }
attributes=$(printf '%s\n' "$settings" | tail -n +2)

# retry DESCRIPTION COMMAND...: runs COMMAND (its output discarded) until it succeeds, at most $attempts times.
retry() {
    what=$1
    shift
    n=1
    until "$@" >/dev/null 2>&1; do
        if [ "$n" -ge "$attempts" ]; then
            echo "temporal-setup: gave up waiting for $what after $n tries" >&2
            return 1
        fi
        echo "temporal-setup: waiting for $what (try $n of $attempts)" >&2
        n=$((n + 1))
        sleep 2
    done
}

retry "Temporal at $address" temporal operator cluster health --address "$address"

if ! temporal operator namespace describe --address "$address" --namespace "$namespace" >/dev/null 2>&1; then
    if [ -z "${AGENTRT_NAMESPACE_RETENTION:-}" ]; then
        echo "temporal-setup: namespace $namespace does not exist at $address: create it" \
            "(temporal operator namespace create --namespace $namespace --retention 30d)" \
            "or set AGENTRT_NAMESPACE_RETENTION" >&2
        exit 1
    fi
    temporal operator namespace create --address "$address" --namespace "$namespace" \
        --retention "$AGENTRT_NAMESPACE_RETENTION" >/dev/null
    echo "temporal-setup: created namespace $namespace (retention $AGENTRT_NAMESPACE_RETENTION)"
fi
# A namespace just created is not known to every part of the server at once: wait until its search
# attributes can be read.
retry "namespace $namespace" temporal operator search-attribute list --address "$address" --namespace "$namespace"

# One create per attribute: `temporal` 1.9 registers only the first of several --name flags.
while read -r name kind; do
    if ! temporal operator search-attribute create --address "$address" --namespace "$namespace" \
        --name "$name" --type "$kind" >/dev/null; then
        echo "temporal-setup: $name must be a $kind search attribute in namespace $namespace; a type cannot" \
            "change in place: remove it (temporal operator search-attribute remove --name $name) and run again" >&2
        exit 1
    fi
    echo "temporal-setup: search attribute $name ($kind) in namespace $namespace"
done <<ATTRIBUTES
$attributes
ATTRIBUTES
