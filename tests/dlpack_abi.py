"""The DLPack 1.1 ABI declared with ctypes (written here from the
specification), for inspecting capsules and hand-building hostile ones:
used by tests/test_dlpack.py and the DLPack fuzz harness (tests/fuzz)."""
import ctypes

import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor),
                            ("manager_ctx", ctypes.c_void_p),
                            ("deleter", LEGACY_DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None,
                                     ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion),
                                     ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER),
                                     ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2

CODES = {"float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16),
         "uint8": (1, 8), "float8_e4m3fn": (10, 8), "float8_e4m3fnuz": (11, 8),
         "float8_e5m2": (12, 8), "float8_e5m2fnuz": (13, 8)}

capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_get_pointer.restype = ctypes.c_void_p
capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
capsule_get_name.restype = ctypes.c_char_p
capsule_get_name.argtypes = [ctypes.py_object]
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def capsule_name(capsule):
    return capsule_get_name(capsule).decode()


def read_capsule(capsule):
    """(managed tensor struct, is_versioned) of an unconsumed capsule; the
    struct keeps the capsule (which owns its memory) alive."""
    name = capsule_name(capsule)
    address = capsule_get_pointer(capsule, name.encode())
    versioned = name == "dltensor_versioned"
    assert versioned or name == "dltensor", name
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    managed = struct.from_address(address)
    managed.capsule = capsule
    return managed, versioned


def dl_fields(dl_tensor):
    ndim = dl_tensor.ndim
    return {
        "data": dl_tensor.data or 0,
        "device": (dl_tensor.device.device_type, dl_tensor.device.device_id),
        "ndim": ndim,
        "dtype": (dl_tensor.dtype.code, dl_tensor.dtype.bits,
                  dl_tensor.dtype.lanes),
        "shape": tuple(dl_tensor.shape[:ndim]),
        "strides": (None if not dl_tensor.strides
                    else tuple(dl_tensor.strides[:ndim])),
        "byte_offset": dl_tensor.byte_offset,
    }


class HandMade:
    """A DLPack managed tensor built with ctypes over a NumPy buffer, whose
    deleter counts its calls. Use .capsule() for a fresh capsule."""

    def __init__(self, array, *, versioned=True, code=None, bits=None,
                 lanes=1, strides="given", flags=0, major=1, minor=1,
                 device=(1, 0), byte_offset=0, ndim=None):
        self.array = array
        self.calls = 0
        ndim = array.ndim if ndim is None else ndim
        self.shape = (ctypes.c_int64 * max(ndim, 1))(
            *(list(array.shape) + [1] * (ndim - array.ndim)))
        self.strides = (ctypes.c_int64 * max(ndim, 1))(
            *([s // array.itemsize for s in array.strides]
              + [1] * (ndim - array.ndim)))
        if code is None:
            code, bits = {np.dtype(np.float32): (2, 32),
                          np.dtype(np.uint8): (1, 8)}[array.dtype]
        tensor = DLTensor()
        tensor.data = array.ctypes.data - byte_offset
        tensor.device = DLDevice(*device)
        tensor.ndim = ndim
        tensor.dtype = DLDataType(code, bits, lanes)
        tensor.shape = self.shape
        tensor.strides = self.strides if strides == "given" else None
        tensor.byte_offset = byte_offset
        if versioned:
            self.deleter = VERSIONED_DELETER(self._delete)
            self.managed = DLManagedTensorVersioned(
                DLPackVersion(major, minor), None, self.deleter, flags, tensor)
            self.name = b"dltensor_versioned"
        else:
            self.deleter = LEGACY_DELETER(self._delete)
            self.managed = DLManagedTensor(tensor, None, self.deleter)
            self.name = b"dltensor"

    def _delete(self, pointer):
        self.calls += 1

    def capsule(self):
        # No destructor: an unconsumed hand-made capsule frees nothing.
        return capsule_new(ctypes.addressof(self.managed), self.name, None)
