"""`python -m pathflow` is the `pathflow` command."""

from pathflow.cli import main

main()
