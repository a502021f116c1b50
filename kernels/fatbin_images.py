"""kernels/fatbin_images.py - lists the images in a fatbin (the file
kernels/build-fatbin.sh writes) and how each is stored, so that the image's
size and its driver floor can be checked without cuobjdump:

    python3 kernels/fatbin_images.py FATBIN [--require-lz4 | --require-zstd]
                                     [--extract DIR]

prints one line per image (kind, architecture, bytes stored, bytes once
decompressed, compression) and the totals. With --require-lz4 it exits 1
unless every image is LZ4-compressed (entry flag 0x2000) and none is
zstd-compressed (0x8000): the compression a CUDA 12.0 driver reads
(kernels/README.md, "Image size"), which the real-code file
fp8q_kernels.fatbin of the CUDA 12 route needs; with --require-zstd unless
every image is zstd-compressed, as the PTX file fp8q_kernels_ptx.fatbin is
in both routes. With --extract DIR it writes each
uncompressed or zstd-compressed image to DIR as sm_ARCH.cubin /
compute_ARCH.ptx (zstd ones through the `zstd` program), so that the
cubins can be measured (readelf) and repacked with fatbinary. Standard
library only; the layout read
here is the one csrc/cuda/kernel_image.c checks (a 16-byte header: magic
0xBA55ED50, version, header size, payload size) followed, per image, by a
64-byte entry header (kind, header size, stored size, architecture,
flags, decompressed size).
"""
import argparse
import os
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
CONTAINER = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQQHHIIIQQQ")
KINDS = {1: "ptx", 2: "elf"}
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000


def images(data):
    """Every image of the fatbin bytes `data`, in file order, as dicts:
    kind ("ptx" or "elf", else the number), arch (e.g. 90), stored (bytes
    in the file), size (bytes once decompressed: stored when not
    compressed), compression ("none", "lz4" or "zstd") and payload (its
    stored bytes' start and end offsets in `data`). Raises
    ValueError where the bytes are not a fatbin or run short."""
    found = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < CONTAINER.size:
            raise ValueError(f"a truncated fatbin header at byte {offset}")
        magic, _, header_size, payload = CONTAINER.unpack_from(data, offset)
        if magic != FATBIN_MAGIC:
            raise ValueError(f"no fatbin magic at byte {offset}")
        position = offset + header_size
        end = position + payload
        if end > len(data):
            raise ValueError("the fatbin is shorter than its header says")
        while position < end:
            if end - position < ENTRY.size:
                raise ValueError(f"a truncated image header at byte {position}")
            (kind, _, entry_size, stored, _, _, _, arch, _, _, flags, _,
             decompressed) = ENTRY.unpack_from(data, position)
            compression = ("zstd" if flags & FLAG_ZSTD else
                           "lz4" if flags & FLAG_LZ4 else "none")
            start = position + entry_size
            found.append({"kind": KINDS.get(kind, kind), "arch": arch, "stored": stored,
                          "size": decompressed if compression != "none" else stored,
                          "compression": compression, "payload": (start, start + stored)})
            position += entry_size + stored
        offset = end
    return found


def extract(data, image, directory):
    """Writes `image` (from images(data)) into `directory`, decompressed, as
    sm_ARCH.cubin or compute_ARCH.ptx, cut to its decompressed size; returns
    the path. zstd images go through the `zstd` program; LZ4 ones are
    refused (ValueError)."""
    start, end = image["payload"]
    stored = data[start:end]
    if image["compression"] == "zstd":
        # The stored bytes end in padding after the zstd frame, which zstd
        # reports as an unsupported format once the frame is out: what
        # counts is the whole image.
        stored = subprocess.run(["zstd", "-d", "-c", "-q"], input=stored,
                                capture_output=True).stdout
        if len(stored) < image["size"]:
            raise ValueError(f"zstd gave {len(stored)} of the image's {image['size']} bytes")
    elif image["compression"] != "none":
        raise ValueError(f"cannot extract a {image['compression']} image")
    name = (f"sm_{image['arch']}.cubin" if image["kind"] == "elf"
            else f"compute_{image['arch']}.ptx")
    path = os.path.join(directory, name)
    with open(path, "wb") as file:
        file.write(stored[:image["size"]])
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fatbin")
    parser.add_argument("--require-lz4", action="store_const", const="lz4",
                        dest="require", help="exit 1 unless every image is LZ4-compressed")
    parser.add_argument("--require-zstd", action="store_const", const="zstd",
                        dest="require", help="exit 1 unless every image is zstd-compressed")
    parser.add_argument("--extract", metavar="DIR",
                        help="write each image, decompressed, into DIR")
    arguments = parser.parse_args(argv)
    with open(arguments.fatbin, "rb") as file:
        data = file.read()
    listed = images(data)
    for image in listed:
        print(f"{image['kind']:>3} sm_{image['arch']:<4} {image['stored']:>11,} bytes stored "
              f"{image['size']:>11,} decompressed  {image['compression']}")
    print(f"{len(listed)} images, {len(data):,} bytes in the file, "
          f"{sum(image['size'] for image in listed):,} decompressed")
    if arguments.extract:
        os.makedirs(arguments.extract, exist_ok=True)
        for image in listed:
            print("wrote", extract(data, image, arguments.extract))
    if arguments.require:
        other = [image for image in listed if image["compression"] != arguments.require]
        if other or not listed:
            print(f"fatbin_images.py: not every image is {arguments.require.upper()}-compressed: "
                  + ", ".join(f"{i['kind']} sm_{i['arch']} ({i['compression']})"
                              for i in other), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
