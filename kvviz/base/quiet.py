"""Keep a library's chatter off kvviz's stderr.

transformers logs warnings (and sometimes `warnings.warn`s) while it parses a config: a refusal
would become several lines, a success would print noise above the plan. kvviz reports what is
wrong itself, in one line, so the chatter is captured and dropped here. Nothing is imported:
the library's logging goes through the standard `logging` module.
"""

from __future__ import annotations

import contextlib
import warnings


@contextlib.contextmanager
def quiet_library():
    """Within the block: no log record of any level is emitted and every warning is captured
    (and dropped); both are put back as they were afterwards."""
    import logging  # only a transformers read needs it: ~6 ms off every command that does not

    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            yield
    finally:
        logging.disable(before)
