from .cli import main
from .errors import run_command

if __name__ == "__main__":
    run_command(main)
