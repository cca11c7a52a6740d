"""A folder tree with one folder per taxon (the ImageFolder layout): ``ROOT/Vulpes vulpes/0001.jpg``.

The label of an image is the name of the folder it is in (``Vulpes vulpes``, ``vulpes_vulpes``,
``Peromyscus sp.``); folders may nest (``ROOT/train/Vulpes vulpes/``), the innermost names the taxon, and the
folders above it are kept as ``split_folder``. A folder named by a lone lowercase word inside one named by a
capitalised word is an epithet in its genus (``Vulpes/lagopus/``: *Vulpes lagopus*, not the bird genus
*Lagopus*), and the two make the label. Files are read in place, in sorted order; hidden files and
folders are skipped. A linked folder (a season kept on another disk) is read like any other, under the link's
name, and listed in the card's notes; a link to a folder inside the tree (a link loop, a second name for a species'
folder) is not followed, and one that leads to a folder already read is read once: either is listed, as is a link
to a photo in the tree (read under its own folder), and a photo's label is always its real folder's name. A file that is
not an image by its name (a ``README.txt``, a ``labels.csv``) and an image directly in ``ROOT`` (no folder names
its taxon) are records with a problem, so they appear in the failures table rather than vanish.

Why a module: the one kind whose labels come from the file system.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from cladebench.curate.sources.images.records import ImageRecord
from cladebench.errors import CladebenchError

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff",
                            ".heic", ".heif"})
"""File name endings read as images (in any case)."""
_EPITHET = re.compile(r"[a-z][a-z-]*")
_GENUS = re.compile(r"[A-Z][a-z-]*")
_CONTAINERS = frozenset({"train", "training", "test", "testing", "val", "valid", "validation", "images", "photos",
                         "pictures", "data", "dataset", "all"})
"""Capitalised folder names that hold species folders rather than name a genus (``Photos/fox/`` is a fox)."""


class FolderSource:
    """The images under a folder tree, labelled by their folders."""

    kind = "folder"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise CladebenchError(f"{self.root}: not a folder")
        self.notes: dict[str, object] = {"root": str(self.root)}

    def files(self) -> Iterator[tuple[Path, str | None]]:
        """Each file in sorted order with None, and each folder not read again with why (it leads to one read).

        A link to a folder inside the tree is never followed (the folder is read under its own name, which is its
        photos' label, wherever the link sorts); a link out of the tree is followed once and noted."""
        root = os.path.realpath(self.root)
        seen = {root}
        linked: dict[str, str] = {}
        self.notes["linked_folders"] = linked
        for folder, folders, files in os.walk(self.root, followlinks=True):
            kept = []
            for name in sorted(folders):
                if name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                real = os.path.realpath(path)
                if real in seen or (os.path.islink(path) and os.path.commonpath([root, real]) == root):
                    yield Path(path), f"leads to {real}, which is read once, under its own name"
                    continue
                seen.add(real)
                if os.path.islink(path):
                    linked[Path(path).relative_to(self.root).as_posix()] = real
                kept.append(name)
            folders[:] = kept
            for name in sorted(files):
                if name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                real = os.path.realpath(path)
                if os.path.islink(path) and os.path.commonpath([root, real]) == root and os.path.isfile(real):
                    yield Path(path), f"leads to {real}, which is read once, under its own name"
                else:
                    yield Path(path), None

    def records(self, images: bool = True) -> Iterator[ImageRecord]:
        for path, repeated in self.files():
            relative = path.relative_to(self.root)
            key = relative.as_posix()
            record = ImageRecord(key=key, where=key, path=path)
            if len(relative.parts) > 1:
                taxon = 2  # folders that name the taxon, counted from the file
                if len(relative.parts) > 2 and _EPITHET.fullmatch(relative.parts[-2]) and \
                        _GENUS.fullmatch(relative.parts[-3]) and relative.parts[-3].lower() not in _CONTAINERS:
                    taxon = 3
                record.label = " ".join(relative.parts[-taxon:-1])
                record.values["source_id"] = key
                if len(relative.parts) > taxon:
                    record.values["split_folder"] = "/".join(relative.parts[:-taxon])
            if repeated is not None:
                record.label, record.problem = None, ("repeated_folder" if path.is_dir() else "repeated_file", repeated)
            elif path.suffix.lower() not in IMAGE_SUFFIXES:
                record.problem = ("not_an_image_file", f"{path.suffix or 'no suffix'} is not an image file name")
            elif record.label is None:
                record.problem = ("no_label", "directly in the root folder: put it in a folder named after its "
                                              "taxon, or load a table of labels (--images-dir: where the files are)")
            yield record


__all__ = ["IMAGE_SUFFIXES", "FolderSource"]
