#!/bin/bash
# The HyperPod lifecycle script on_create_eks.sh under its earlier path. Entries written by earlier releases exec
# pkg/fmcluster/runtime/lifecycle/on_create_eks.sh, and during the deploy that brings this runtime they still do: the
# entries are rewritten after the pointers name this runtime. The script lives in the hyperpod platform's node folder.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../platforms/hyperpod/node/on_create_eks.sh" "$@"
