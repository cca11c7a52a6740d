"""Photos of the synthetic world: organisms drawn from their looks on natural-looking backdrops.

Why it exists: embedding, tasks and builders need real image bytes. Every nuisance (canvas shape,
background, pose, light, camera noise) comes from the photo's seed and none from the species, so
two species drawn with one seed differ only where their looks differ.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from cladebench.errors import unknown_name
from cladebench.synthetic.looks import Appearance, hsv
from cladebench.synthetic.seeds import SALT_LOOK, SALT_NOISE, SALT_RENDER, seeded_rng

MIN_RENDER_SIZE = 32
"""Smallest longest side :meth:`World.render` draws: below it an organism's eye and marks are a pixel or two."""


_BACKGROUND_HUES = ((0.17, 0.40), (0.05, 0.12), (0.52, 0.62), (0.0, 1.0))  # greens, browns, sky, any grey


def _unit_outline(look: Appearance, points: int = 72) -> np.ndarray:
    """The body outline in body units: head at +x, length 1 along x, width ``aspect`` along y."""
    t = np.linspace(0.0, 2 * math.pi, points, endpoint=False)
    r = (1.0 + look.lobe_depth * np.cos(look.lobes * t)) * (1.0 + look.taper * np.cos(t))
    x, y = np.cos(t) * r, np.sin(t) * r * look.aspect
    scale = 1.0 / (x.max() - x.min())
    return np.stack([(x - (x.max() + x.min()) / 2) * scale, y * scale], axis=1)


def _circle_poly(cx: float, cy: float, rx: float, ry: float, points: int = 18) -> np.ndarray:
    t = np.linspace(0.0, 2 * math.pi, points, endpoint=False)
    return np.stack([cx + rx * np.cos(t), cy + ry * np.sin(t)], axis=1)


def _rotate(points: np.ndarray, angle: float, about: tuple[float, float]) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    shifted = points - about
    return np.stack([shifted[:, 0] * c - shifted[:, 1] * s, shifted[:, 0] * s + shifted[:, 1] * c], axis=1) + about


@functools.lru_cache(maxsize=4096)
def _body_geometry(look: Appearance) -> tuple[np.ndarray, tuple[tuple[str, np.ndarray], ...]]:
    """Outline and pattern shapes of a species in body units, computed once per species.

    Pattern shapes are polygons (``"pattern"`` in the pattern colour, ``"body"`` in the body colour
    for rings); they are clipped to the body when drawn, so they may overhang it.
    """
    outline = _unit_outline(look)
    half_width = float(np.abs(outline[:, 1]).max())
    count, width, angle = look.pattern_count, look.pattern_width, look.pattern_angle
    shapes: list[tuple[str, np.ndarray]] = []
    rng = seeded_rng(SALT_LOOK, look.pattern_seed)
    if look.pattern in ("bars", "chevrons"):
        spacing = 1.0 / count
        for j in range(count):
            x = -0.5 + (j + 0.5) * spacing
            w = spacing * width / 2
            if look.pattern == "bars":
                bar = np.array([[x - w, -1.0], [x + w, -1.0], [x + w, 1.0], [x - w, 1.0]])
            else:
                tip = spacing * 0.6
                bar = np.array([[x - w, -1.0], [x + w, -1.0], [x + w + tip, 0.0], [x + w, 1.0], [x - w, 1.0],
                                [x - w + tip, 0.0]])
            shapes.append(("pattern", _rotate(bar, angle, (x, 0.0))))
    elif look.pattern == "stripes":
        spacing = 2 * half_width / count
        for j in range(count):
            y = -half_width + (j + 0.5) * spacing
            w = spacing * width / 2
            stripe = np.array([[-1.0, y - w], [1.0, y - w], [1.0, y + w], [-1.0, y + w]])
            shapes.append(("pattern", _rotate(stripe, angle * 0.5, (0.0, y))))
    elif look.pattern == "rings":
        for j in range(count // 2 + 1):
            scale = 1.0 - j / (count // 2 + 1.5)
            shapes.append(("pattern" if j % 2 == 0 else "body", outline * scale * (1.0 - width * 0.3)))
    elif look.pattern == "checker":
        cols, rows = count, max(2, count // 2)
        cell_w, cell_h = 1.0 / cols, 2 * half_width / rows
        for i in range(cols):
            for j in range(rows):
                if (i + j) % 2 == 0:
                    x0, y0 = -0.5 + i * cell_w, -half_width + j * cell_h
                    shrink = (1.0 - width) * 0.25
                    cell = np.array([[x0 + cell_w * shrink, y0 + cell_h * shrink],
                                     [x0 + cell_w * (1 - shrink), y0 + cell_h * shrink],
                                     [x0 + cell_w * (1 - shrink), y0 + cell_h * (1 - shrink)],
                                     [x0 + cell_w * shrink, y0 + cell_h * (1 - shrink)]])
                    shapes.append(("pattern", cell))
    else:  # spots, blotches, speckle: seeded positions inside the body
        number, radius = {"spots": (count * 2, 0.03 + 0.07 * width), "blotches": (count // 2 + 1, 0.08 + 0.14 * width),
                          "speckle": (count * 7, 0.012 + 0.012 * width)}[look.pattern]
        placed = 0
        while placed < number:
            x, y = rng.uniform(-0.45, 0.45), rng.uniform(-half_width, half_width)
            if (x / 0.5) ** 2 + (y / max(half_width, 1e-6)) ** 2 > 1.0:
                continue
            if look.pattern == "blotches":
                t = np.linspace(0.0, 2 * math.pi, 14, endpoint=False)
                r = radius * rng.uniform(0.65, 1.25, size=t.size)
                shapes.append(("pattern", np.stack([x + r * np.cos(t), y + r * np.sin(t) * 0.8], axis=1)))
            else:
                shapes.append(("pattern", _circle_poly(x, y, radius, radius, 12)))
            placed += 1
    return outline, tuple(shapes)


@functools.lru_cache(maxsize=4096)
def _stacked_shapes(look: Appearance) -> tuple[np.ndarray, tuple[int, ...]]:
    """The pattern shapes of :func:`_body_geometry` as one (N, 2) array and the row where each starts
    (plus the end), so a pose can place them all at once."""
    _, shapes = _body_geometry(look)
    bounds = (0, *itertools.accumulate(len(shape) for _, shape in shapes))
    points = np.concatenate([shape for _, shape in shapes]) if shapes else np.zeros((0, 2))
    return points, bounds


@dataclass(frozen=True)
class _Pose:
    cx: float
    cy: float
    length: float
    angle: float
    mirror: bool

    def place(self, points: np.ndarray) -> np.ndarray:
        """Body units to image pixels: mirror, scale, rotate, translate."""
        pts = points * self.length
        if self.mirror:
            pts = pts * np.array([1.0, -1.0])
        c, s = math.cos(self.angle), math.sin(self.angle)
        return np.stack([pts[:, 0] * c - pts[:, 1] * s + self.cx, pts[:, 0] * s + pts[:, 1] * c + self.cy], axis=1)


def _flat(points: np.ndarray) -> list[float]:
    return points.ravel().tolist()


def _scale_rgb(rgb: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    return tuple(min(255, max(0, round(c * factor))) for c in rgb)  # type: ignore[return-value]


def _draw_organism(canvas: Image.Image, look: Appearance, pose: _Pose, light: float) -> None:
    """Draw one organism; uses no randomness, so the nuisance draws of an image never depend on species."""
    draw = ImageDraw.Draw(canvas)
    outline, shapes = _body_geometry(look)
    body, pattern = _scale_rgb(look.body_rgb, light), _scale_rgb(look.pattern_rgb, light)
    accent, detail = _scale_rgb(look.accent_rgb, light), _scale_rgb(look.eye_rgb, light)
    half_width = float(np.abs(outline[:, 1]).max())
    limb = max(2, round(pose.length * 0.025))
    # Legs and tail first, so the body covers their roots.
    for j in range(look.leg_pairs):
        x = -0.28 + 0.56 * (j + 0.5) / look.leg_pairs
        for side in (-1.0, 1.0):
            leg = np.array([[x, 0.0], [x + 0.06, side * (half_width + look.leg_length)]])
            draw.line(_flat(pose.place(leg)), fill=accent, width=limb)
    if look.tail:
        draw.line(_flat(pose.place(np.array([[-0.4, 0.0], [-0.5 - look.tail, 0.0]]))), fill=accent, width=limb + 1)
    # The coat: pattern drawn on a patch filled with the body colour, pasted through the body's mask.
    placed = pose.place(outline)
    x0, y0 = np.floor(placed.min(axis=0)).astype(int) - 1
    x1, y1 = np.ceil(placed.max(axis=0)).astype(int) + 1
    size = (int(x1 - x0), int(y1 - y0))
    offset = np.array([x0, y0], dtype=float)
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).polygon(_flat(placed - offset), fill=255)
    coat = Image.new("RGB", size, body)
    coat_draw = ImageDraw.Draw(coat)
    # All pattern shapes are placed in one array operation (a speckled coat has up to 70 of them, and
    # placing them one by one was the renderer's largest cost); the arithmetic per point is unchanged.
    points, bounds = _stacked_shapes(look)
    flat = _flat(pose.place(points) - offset) if len(points) else []
    for (colour, _), start, end in zip(shapes, bounds[:-1], bounds[1:], strict=True):
        coat_draw.polygon(flat[2 * start:2 * end], fill=pattern if colour == "pattern" else body)
    canvas.paste(coat, (int(x0), int(y0)), mask)
    if look.rim:
        width = max(1, round(look.rim * pose.length))
        draw.line(_flat(np.vstack([placed, placed[:1]])), fill=accent, width=width, joint="curve")
    # Species detail: the eye at the head and a row of small marks on the flank.
    eye = pose.place(np.array([[0.36, half_width * 0.25]]))[0]
    r_eye = max(2.5, pose.length * 0.045)
    draw.ellipse([eye[0] - r_eye, eye[1] - r_eye, eye[0] + r_eye, eye[1] + r_eye], fill=(250, 250, 240))
    r_pupil = r_eye * 0.62
    draw.ellipse([eye[0] - r_pupil, eye[1] - r_pupil, eye[0] + r_pupil, eye[1] + r_pupil], fill=detail)
    r_mark = max(2.0, pose.length * 0.028)
    for j in range(look.marks):
        centre = np.array([-0.18 + j * 0.085, -half_width * 0.45])
        if look.mark_shape == "dot":
            shape = _circle_poly(centre[0], centre[1], 0.028, 0.028, 10)
        elif look.mark_shape == "bar":
            shape = np.array([[-0.012, -0.045], [0.012, -0.045], [0.012, 0.045], [-0.012, 0.045]]) + centre
        else:
            shape = np.array([[0.0, -0.035], [0.032, 0.028], [-0.032, 0.028]]) + centre
        draw.polygon(_flat(pose.place(shape)), fill=detail, outline=accent if r_mark > 3 else None)


_NOISE_SIGMAS = (1.5, 3.0, 4.5, 6.5, 9.0)


@functools.lru_cache(maxsize=4)
def _noise_tiles(size: int) -> tuple[Image.Image, ...]:
    """Gaussian sensor noise around grey 128, one tile per noise level, reused by cropping at random
    offsets: drawing fresh noise for every image cost more than everything else the renderer does."""
    rng = seeded_rng(SALT_NOISE, size)
    shape = (size + 64, size + 64, 3)
    return tuple(
        Image.fromarray(np.clip(rng.normal(128.0, sigma, size=shape), 0, 255).astype(np.uint8), "RGB")
        for sigma in _NOISE_SIGMAS
    )


def _canvas_size(rng: np.random.Generator, longest: int, landscape: bool) -> tuple[int, int]:
    ratio = float(rng.choice((1.0, 0.75, 0.75, 0.667, 0.8)))
    short = round(longest * ratio)
    if landscape or rng.random() < 0.6:
        return longest, short
    return short, longest


def _background(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A muted natural backdrop: a smooth field (gradient at coarse grids, mottled at fine ones) plus
    a scatter of blades and pebbles, so the organism is never the only structure in the picture."""
    lo, hi = _BACKGROUND_HUES[int(rng.integers(len(_BACKGROUND_HUES)))]
    hues = rng.uniform(lo, hi, size=2)
    sat = rng.uniform(0.05, 0.35, size=2)
    val = rng.uniform(0.3, 0.85, size=2)
    colours = np.array([hsv(h, s, v) for h, s, v in zip(hues, sat, val, strict=True)], dtype=np.float32)
    grid = int(rng.choice((2, 3, 5, 9, 17, 33)))
    weights = rng.random((grid, grid, 1)).astype(np.float32)
    if grid <= 3:
        weights = np.linspace(0.0, 1.0, grid * grid, dtype=np.float32).reshape(grid, grid, 1)
        weights = np.rot90(weights, int(rng.integers(4))).copy()
    small = colours[0] * (1.0 - weights) + colours[1] * weights
    image = Image.fromarray(small.astype(np.uint8), "RGB").resize((width, height), Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(0, 14))):
        x, y = rng.uniform(0, width), rng.uniform(0, height)
        shade = tuple(int(c) for c in np.clip(colours[int(rng.integers(2))] * rng.uniform(0.6, 1.3), 0, 255))
        if rng.random() < 0.6:
            angle, length = rng.uniform(0, math.pi), rng.uniform(0.05, 0.25) * height
            draw.line([x, y, x + length * math.cos(angle), y - length * math.sin(angle)], fill=shade,
                      width=int(rng.integers(1, 4)))
        else:
            r = rng.uniform(0.01, 0.04) * height
            draw.ellipse([x - r, y - r * 0.7, x + r, y + r * 0.7], fill=shade)
    return image


def _finish(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Camera effects: sometimes out of focus, a white balance off by up to 10%, sensor noise."""
    if rng.random() < 0.15:
        image = image.filter(ImageFilter.BoxBlur(1))
    gains = rng.uniform(0.9, 1.1, size=3)
    lut = np.minimum(np.rint(np.arange(256.0)[None, :] * gains[:, None]), 255).astype(np.uint8)
    image = image.point(lut.ravel().tolist())
    tile = _noise_tiles(max(image.size))[int(rng.integers(len(_NOISE_SIGMAS)))]
    dx, dy = (int(v) for v in rng.integers(0, 64, size=2))
    noise = tile.crop((dx, dy, dx + image.size[0], dy + image.size[1]))
    return ImageChops.add(image, noise, 1.0, -128)


def _single_pose(rng: np.random.Generator, width: int, height: int) -> _Pose:
    length = float(rng.uniform(0.4, 0.72)) * min(width, height)
    margin = length * 0.5
    cx = float(rng.uniform(margin, width - margin)) if width > 2 * margin else width / 2
    cy = float(rng.uniform(margin, height - margin)) if height > 2 * margin else height / 2
    return _Pose(cx, cy, length, float(rng.uniform(0, 2 * math.pi)), bool(rng.random() < 0.5))


def encode_image(image: Image.Image, image_format: str = "jpeg", *, quality: int = 90) -> bytes:
    """Encode a rendered image as JPEG, WebP or PNG bytes (deterministic for the same Pillow build)."""
    key = format_key(image_format)
    buffer = io.BytesIO()
    if key == "jpeg":
        image.save(buffer, "JPEG", quality=quality)
    elif key == "webp":
        # method 2 is several times faster than the default 4 at a few percent more bytes.
        image.save(buffer, "WEBP", quality=quality, method=2)
    else:
        image.save(buffer, "PNG", compress_level=1)
    return buffer.getvalue()


def format_key(image_format: str) -> str:
    """The canonical name of an image format (``jpg`` is ``jpeg``); an unknown one is an error naming the known."""
    key = {"jpg": "jpeg"}.get(image_format.lower(), image_format.lower())
    if key not in ("jpeg", "webp", "png"):
        raise unknown_name("image format", image_format, ["jpeg", "webp", "png"])
    return key


def draw_photo(look: Appearance, *, seed: int, size: int) -> Image.Image:
    """One photo of one organism, ``size`` pixels on its longest side; every nuisance comes from ``seed``."""
    rng = seeded_rng(SALT_RENDER, seed)
    width, height = _canvas_size(rng, size, landscape=False)
    canvas = _background(rng, width, height)
    pose = _single_pose(rng, width, height)
    light = float(rng.uniform(0.85, 1.15))
    _draw_organism(canvas, look, pose, light)
    return _finish(canvas, rng)


def draw_pair_photo(looks: Sequence[Appearance], *, seed: int, size: int) -> Image.Image:
    """One photo of two organisms side by side, overlapping slightly at their tails, heads pointing apart, so
    that each one's eye and marks stay in view (also after a centre crop to a square)."""
    rng = seeded_rng(SALT_RENDER, seed, 2)
    width, height = _canvas_size(rng, size, landscape=True)
    canvas = _background(rng, width, height)
    lengths = rng.uniform(0.3, 0.4, size=2) * width
    meet_x = width / 2 + float(rng.uniform(-0.04, 0.04)) * width
    poses = []
    for side, length in zip((-1, 1), lengths, strict=True):
        # Tails meet at meet_x and overlap by a tenth of each body; heads point away from it.
        cx = meet_x + side * float(length) * 0.45
        cy = height / 2 + float(rng.uniform(-0.12, 0.12)) * height
        angle = (math.pi if side < 0 else 0.0) + float(rng.uniform(-0.45, 0.45))
        poses.append(_Pose(cx, cy, float(length), angle, bool(rng.random() < 0.5)))
    light = float(rng.uniform(0.85, 1.15))
    for look, pose in zip(looks, poses, strict=True):
        _draw_organism(canvas, look, pose, light)
    return _finish(canvas, rng)
