"""``python -m apiserver [flags]`` runs the server in the foreground."""

from apiserver.cli import main

main()
