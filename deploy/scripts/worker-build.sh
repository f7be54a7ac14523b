#!/bin/sh
# The Kubernetes objects of one build's workers, printed for `kubectl apply -f -`: the worker and tools
# worker Deployments, the worker's HPA and a PodDisruptionBudget each, from the templates in
# deploy/k8s/worker-build/. Every object is named after the build (agentrt-worker-0-2-0 for build
# 0.2.0) and labelled with it (app.kubernetes.io/version), and the pods poll as that version of
# Temporal's Worker Deployment `agentrt` (AGENTRT_DEPLOYMENT, AGENTRT_BUILD_ID), so two builds run side
# by side and each session stays on the build that started it (deploy/RUNBOOK.md, "Versioned rollouts").
#
# Usage: deploy/scripts/worker-build.sh BUILD_ID IMAGE
#   BUILD_ID  the build, by convention the image's tag: 1 to 63 letters, digits, '.', '_' and '-',
#             starting and ending with a letter or digit (it is a label value). Names use it in lower
#             case with '.' and '_' as '-': two builds whose ids differ only there would collide.
#   IMAGE     the image the pods run, e.g. registry.example.com/team/agentrt:0.2.0 (or @sha256:...).
set -eu

usage() {
    echo "usage: $0 BUILD_ID IMAGE   (e.g. $0 0.2.0 registry.example.com/team/agentrt:0.2.0)" >&2
    exit 2
}
[ "$#" -eq 2 ] || usage
build_id=$1
image=$2

case $build_id in
    '' | *[!A-Za-z0-9._-]* | [._-]* | *[._-])
        echo "worker-build.sh: build id '$build_id' is not 1 to 63 letters, digits, '.', '_' and '-' starting and ending with a letter or digit" >&2
        exit 2 ;;
esac
if [ "${#build_id}" -gt 63 ]; then
    echo "worker-build.sh: build id '$build_id' is longer than 63 characters (a label value)" >&2
    exit 2
fi
case $image in
    '' | *[!A-Za-z0-9._/:@-]*)
        echo "worker-build.sh: image '$image' is not an image reference (registry/repository:tag or @sha256:digest)" >&2
        exit 2 ;;
esac

name=$(printf '%s' "$build_id" | LC_ALL=C tr 'A-Z._' 'a-z--')
templates="$(dirname "$0")/../k8s/worker-build"
first=1
for template in worker-deployment.yaml worker-hpa.yaml worker-pdb.yaml tools-worker-deployment.yaml tools-worker-pdb.yaml; do
    [ "$first" -eq 1 ] || echo "---"
    first=0
    sed -e "s|__BUILD_ID__|$build_id|g" -e "s|__BUILD_NAME__|$name|g" -e "s|__IMAGE__|$image|g" "$templates/$template"
done
