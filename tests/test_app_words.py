"""The window's shared words (app/words.py): counts that agree, and errors from the system
said as sentences."""

from __future__ import annotations

import errno
import socket

from app.words import count, error_sentence


def test_counts_agree():
    assert count(1, "model") == "1 model"
    assert count(2, "model") == "2 models"
    assert count(0, "server") == "0 servers"
    assert count(1, "reply", "replies") == "1 reply"
    assert count(3, "reply", "replies") == "3 replies"


def test_system_errors_are_sentences():
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "/tmp/x.gguf")
    assert error_sentence(missing) == "/tmp/x.gguf: the file or folder does not exist"
    lookup = socket.gaierror(-2, "Name or service not known")
    said = error_sentence(f"Download failed: {lookup}")
    assert "[Errno" not in said and "could not be found" in said
    assert error_sentence("[Errno 5] Input/output error") == "Input/output error"
    assert error_sentence("the model has no chat template") == "the model has no chat template"
