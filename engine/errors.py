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
