"""``python -m agentrt.cli``: the ``agentrt`` command line, as the console script runs it."""

from agentrt.cli import main

if __name__ == "__main__":
    main()
