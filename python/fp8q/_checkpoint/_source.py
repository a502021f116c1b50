"""Opening a checkpoint as its tensors' names, dtypes and shapes: one
safetensors file, or a folder of shards (its model.safetensors.index.json,
else every *.safetensors file) with the configs beside them. Tensors are
memory-mapped; nothing is read until asked for."""
import json
import os

from fp8q._checkpoint._plan import CheckpointError, json_object
from fp8q._safetensors import SafetensorsReader

# Config files a folder may hold, read when present.
CONFIG_FILES = ("config.json", "hf_quant_config.json", "quanto_qmap.json")
INDEX_FILE = "model.safetensors.index.json"


class FileCheckpoint:
    """The tensors of one or more safetensors files.

    entries: {key: (safetensors dtype code, shape)} in file order.
    metadata: the files' "__metadata__" entries, merged.
    configs: {file name: parsed JSON} for CONFIG_FILES found beside the
    shards of a folder (empty for a single file).
    array(key): the raw bytes as a read-only NumPy array of the tensor's
    shape (bfloat16 as uint16, FP8 as uint8), viewing the memory map.
    (fp8q.torch's subclass adds tensor(key): the same bytes as a torch
    tensor.)
    release(key): drops the tensor's pages from resident memory once read.
    close(): unmaps the files."""

    def __init__(self, path, files, configs):
        self.path = path
        self.configs = configs
        self.entries = {}
        self.metadata = {}
        self._readers = []
        self._reader_of = {}
        try:
            for file in files:
                reader = SafetensorsReader(file)
                self._readers.append(reader)
                self.metadata.update(reader.metadata)
                for key, entry in reader.entries.items():
                    if key in self.entries:
                        raise CheckpointError(
                            f"{key}: in two shards "
                            f"({self._reader_of[key].path} and {file})")
                    self.entries[key] = entry
                    self._reader_of[key] = reader
        except (OSError, ValueError):
            self.close()
            raise

    def array(self, key):
        return self._reader_of[key].tensor(key)

    def release(self, key):
        self._reader_of[key].release(key)

    def close(self):
        for reader in self._readers:
            reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: not readable JSON ({error})") \
            from None


def _shards(folder):
    """The folder's safetensors files: those its index names, else all."""
    index = os.path.join(folder, INDEX_FILE)
    if os.path.isfile(index):
        weight_map = json_object(_read_json(index), index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index}: no \"weight_map\" object")
        for key, file in weight_map.items():
            if not isinstance(file, str):
                raise CheckpointError(
                    f"{index}: weight_map[{key!r}] is not a file name "
                    f"({file!r})")
        files = sorted(set(weight_map.values()))
    else:
        files = sorted(name for name in os.listdir(folder)
                       if name.endswith(".safetensors"))
    if not files:
        raise CheckpointError(f"{folder}: holds no .safetensors file")
    missing = [name for name in files
               if not os.path.isfile(os.path.join(folder, name))]
    if missing:
        raise CheckpointError(f"{folder}: the index names {missing[0]}, "
                              "which is not there")
    return [os.path.join(folder, name) for name in files]


def open_checkpoint(path, kind=FileCheckpoint):
    """A FileCheckpoint of `path` (an instance of `kind`, FileCheckpoint or
    a subclass, built as kind(path, files, configs)): a .safetensors file,
    or a folder of shards with its configs (config.json,
    hf_quant_config.json, quanto_qmap.json). CheckpointError for a missing
    path or a folder without shards; ValueError naming the file for a
    malformed one."""
    path = os.fspath(path)
    if os.path.isdir(path):
        configs = {name: _read_json(os.path.join(path, name))
                   for name in CONFIG_FILES
                   if os.path.isfile(os.path.join(path, name))}
        return kind(path, _shards(path), configs)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such file or folder")
    return kind(path, [path], {})
