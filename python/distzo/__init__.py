"""distzo: zeroth-order (MeZO/ZO2) fine-tuning of language models, from Python.

The C library (libdistzo) does the work; this package loads models, runs their forward
and generation, and trains with the command line's settings and run folders::

    import distzo
    model = distzo.load("stories260K.bin", tokenizer="tok512.bin")
    print(model.generate("Once upon a time", max_tokens=20, temperature=0))
    result = distzo.Trainer(model, "sst2/train.tsv", steps=100, lr=1e-4, out="runs/py").train()

Errors the library reports raise distzo.Error (a subclass per kind that is also the
matching built-in: FileNotFoundError, ValueError, OSError (FileError), MemoryError), with its message.
"""
from ._distzo import (VERSION as __version__, Error, FormatError, InvalidError, FileError, NoMemoryError,
                      NotFoundError, UnsupportedError)
from ._model import Model, Tokenizer, load, set_threads
from ._trainer import Trainer, export

__all__ = ["Error", "FormatError", "InvalidError", "FileError", "NoMemoryError", "NotFoundError", "UnsupportedError",
           "Model", "Tokenizer", "Trainer", "export", "load", "set_threads", "__version__"]
