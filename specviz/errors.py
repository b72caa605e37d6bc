"""Errors that specviz raises for bad input.

Every error carries a message written for the person using the tool: what went wrong and what
to do next. The app and the CLI show these messages as they are; anything else is a bug.
"""


class SpecvizError(Exception):
    """Base class: a problem the user can fix, described in plain words."""


class ConfigError(SpecvizError, ValueError):
    """A decoding setting is out of range or the prompt is unusable."""


class ModelError(SpecvizError):
    """A model cannot be loaded or cannot be used as asked."""


class ModelUnavailableError(ModelError):
    """The model is not on this machine and the hub cannot be reached."""


class VocabularyMismatchError(ModelError):
    """The draft and the target do not share one vocabulary."""


class TraceError(SpecvizError, ValueError):
    """A trace file is not valid JSON, has the wrong schema, or breaks an invariant."""
