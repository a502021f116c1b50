"""`python -m fp8q`: the command line (fp8q._cli._main has its commands)."""
import sys

from fp8q._cli._main import main

if __name__ == "__main__":
    sys.exit(main())
