"""An OCI image archive of one layer, made from a root filesystem tarball, byte for byte the same for the same input.

deploy/image/build.sh makes the root filesystem (mmdebstrap: Debian's packages and the project's wheels) as a tar
whose entries are sorted and whose times are clamped to ``SOURCE_DATE_EPOCH``; this writes the image around it:
the layer (that tar, gzip without a name or a time), the image's config (its user, environment, working
directory and command, ``created`` at the epoch), the manifest, and the OCI layout (``oci-layout``, ``index.json``,
``blobs/sha256/``) as a tar of its own with the same order, owner and times every time. No daemon, no storage
driver and no tool whose version would change the bytes: what is in the archive depends on the root filesystem
and the arguments alone, so two builds of the same inputs have the same digest.

Usage: ``python3 oci.py ROOTFS_TAR OUT_ARCHIVE --name REF --epoch SECONDS --config CONFIG_JSON``; prints the
manifest's digest (``sha256:...``), the image's digest as a registry reports it after ``skopeo copy``.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CHUNK = 1 << 20


def canonical(document: dict[str, Any]) -> bytes:
    """JSON with sorted keys and no spaces: one byte string per document."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def compress(rootfs: Path, layer: Path) -> tuple[str, str]:
    """Gzip ``rootfs`` into ``layer`` (no file name, time 0); the digests of the uncompressed tar (the config's
    ``diff_id``) and of the compressed blob."""
    raw = hashlib.sha256()
    with rootfs.open("rb") as source, layer.open("wb") as sink, \
            gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=6) as packed:
        while chunk := source.read(CHUNK):
            raw.update(chunk)
            packed.write(chunk)
    blob = hashlib.sha256()
    with layer.open("rb") as written:
        while chunk := written.read(CHUNK):
            blob.update(chunk)
    return f"sha256:{raw.hexdigest()}", f"sha256:{blob.hexdigest()}"


def descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": f"sha256:{hashlib.sha256(data).hexdigest()}", "size": len(data)}


def build(rootfs: Path, out: Path, *, name: str, epoch: int, config: dict[str, Any]) -> str:
    """Write the archive ``out``; the manifest's digest."""
    created = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        layer = Path(scratch) / "layer"
        diff_id, layer_digest = compress(rootfs, layer)
        image_config = canonical({
            "architecture": "amd64", "os": "linux", "created": created, "config": config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": created, "created_by": "deploy/image/build.sh"}],
        })
        layer_descriptor = {"mediaType": LAYER, "digest": layer_digest, "size": layer.stat().st_size}
        manifest = canonical({"schemaVersion": 2, "mediaType": MANIFEST,
                              "config": descriptor(CONFIG, image_config), "layers": [layer_descriptor]})
        index = canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
            descriptor(MANIFEST, manifest) | {"annotations": {"org.opencontainers.image.ref.name": name}}]})
        blobs = {descriptor(CONFIG, image_config)["digest"]: image_config, descriptor(MANIFEST, manifest)["digest"]:
                 manifest}
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as archive:
            def add(path: str, *, data: bytes | None = None, file: Path | None = None, directory: bool = False) -> None:
                info = tarfile.TarInfo(path)
                info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
                if directory:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    archive.addfile(info)
                    return
                info.mode = 0o644
                if file is not None:
                    info.size = file.stat().st_size
                    with file.open("rb") as content:
                        archive.addfile(info, content)
                else:
                    assert data is not None
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))

            add("blobs", directory=True)
            add("blobs/sha256", directory=True)
            entries: dict[str, bytes | Path] = {digest.removeprefix("sha256:"): data for digest, data in blobs.items()}
            entries[layer_digest.removeprefix("sha256:")] = layer
            for hexdigest in sorted(entries):
                entry = entries[hexdigest]
                if isinstance(entry, Path):
                    add(f"blobs/sha256/{hexdigest}", file=entry)
                else:
                    add(f"blobs/sha256/{hexdigest}", data=entry)
            add("index.json", data=index)
            add("oci-layout", data=canonical({"imageLayoutVersion": "1.0.0"}))
        shutil.move(partial, out)
    return str(descriptor(MANIFEST, manifest)["digest"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--name", required=True, help="the image's reference (index.json's ref.name)")
    parser.add_argument("--epoch", type=int, required=True, help="SOURCE_DATE_EPOCH: the image's created time")
    parser.add_argument("--config", required=True, help="the config's `config` object (User, Env, Cmd, ...) as JSON")
    args = parser.parse_args(argv)
    print(build(args.rootfs, args.out, name=args.name, epoch=args.epoch, config=json.loads(args.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
