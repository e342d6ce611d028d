"""Generate the Python client with openapi-python-client 0.29 (its library entry point, as its CLI does) and
write one line per generator warning, for run.sh to hold against warnings.expected.

usage: generate_python.py <openapi.json> <config.yaml> <output package dir> <warnings file>

The warnings are printed as the CLI prints them; each is also written as `python: <header> <detail>`, white space
collapsed to single spaces. An error (no client generated) exits 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from openapi_python_client import generate
from openapi_python_client.cli import handle_errors
from openapi_python_client.config import Config, ConfigFile, MetaType
from openapi_python_client.parser.errors import ErrorLevel


def main() -> int:
    document, config_path, output, warnings_file = map(Path, sys.argv[1:5])
    config = Config.from_sources(
        ConfigFile.load_from_path(path=config_path),
        MetaType.NONE,
        document,
        "utf-8",
        overwrite=True,
        output_path=output,
    )
    errors = generate(config=config)
    with warnings_file.open("w") as out:
        for error in errors:
            text = " ".join(f"{error.header} {error.detail or ''}".split())
            out.write(f"python: {text}\n")
    try:
        handle_errors(errors)
    except click.exceptions.Exit as exit:
        return exit.exit_code
    return 1 if any(e.level == ErrorLevel.ERROR for e in errors) else 0


if __name__ == "__main__":
    sys.exit(main())
