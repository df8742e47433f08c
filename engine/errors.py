"""Errors the engine raises for bad input; each message names the file or setting at fault."""


class CorralError(Exception):
    """Base class for errors a user can act on."""


class ModelLoadError(CorralError):
    """A model could not be found, read, imported or loaded."""


class EngineClosedError(CorralError):
    """A request was made to an engine that has shut down."""


class LibraryError(CorralError):
    """A model could not be downloaded or deleted (the message says why and where)."""


class EngineBusyError(CorralError):
    """Too many requests are already waiting; the message says how many and what to do."""


class EmbeddingInputError(CorralError):
    """An input an embedding or reranker model cannot take (too long, a token outside its
    vocabulary): `index` is its place among the inputs (among a rerank's documents), None
    for a rerank's query."""

    def __init__(self, message: str, index: int | None) -> None:
        super().__init__(message)
        self.index = index


class ModelNotFoundError(CorralError):
    """A request named a model the engine does not serve; the message lists those it does."""


class ModelUnavailableError(CorralError):
    """A model could not be loaded in time: the memory it needs is held by models that are
    answering requests. `retry_after_s` says when trying again makes sense."""

    def __init__(self, message: str, retry_after_s: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
