"""fp8q._atomic_file: a file replaced whole or not at all, the one way
fp8q's savers write (CalibrationCache.save and export_tensorrt,
fp8q.gemm_tuning.save, `python -m fp8q convert`)."""
import contextlib
import os
import uuid


@contextlib.contextmanager
def atomic_file(path):
    """Yields a new binary file beside `path`, under a hidden name that is
    this call's own (".NAME.<32 hex digits>.tmp", so two writers never
    share one). When the block ends without an exception the file is
    flushed to disk and renamed over `path`: a reader sees the old file or
    the whole new one, never a part. On any exception, the rename's
    included, the temporary file is removed and the exception passes on.
    The file has the permissions a plain open() gives it (0o666 less the
    umask); an OSError from creating it passes on as it is."""
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    file = open(temporary, "xb")
    try:
        with file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
