"""kvviz's version, in one place: the package (`kvviz.__version__`), the parsed-config cache's key
(kvviz.families.parsed) and the distribution's metadata (pyproject.toml reads it) all ask it."""

__version__ = "0.2.0"
