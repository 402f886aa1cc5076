"""Rendered pictures of the world's visual entities, with controlled attributes.

No pretrained vision model exists here, so images are drawn: every product, person and place
has a few discrete visual attributes (``ATTRIBUTES``) that the picture shows unambiguously and
that a generic caption (``describe``) can state without ever naming the entity. Several
pictures of one entity differ by position, scale, rotation, background and pixel noise (all
drawn from the seed), so an encoder can be tested on pictures it has not seen.

Everything is deterministic: ``render(kind, attributes, seed, size)`` returns the same pixels for
the same arguments on every machine (pure PIL drawing plus a seeded numpy noise field).
Shapes are drawn at twice the target size and downsampled, so edges stay clean at 64 px.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# --------------------------------------------------------------------------- vocabulary
ATTRIBUTES: dict[str, dict[str, tuple[str, ...]]] = {
    "product": {
        "shape": ("round", "square", "triangular", "tall"),
        "colour": ("red", "orange", "yellow", "green", "blue", "purple", "black", "white"),
        "pattern": ("plain", "striped", "dotted", "checked"),
        "logo_position": ("top left", "top right", "bottom left", "bottom right", "center"),
        "logo_colour": ("red", "yellow", "green", "blue", "black", "white"),
        "count": ("one", "two", "three"),
    },
    "person": {
        "clothing_colour": ("red", "orange", "yellow", "green", "blue", "purple", "black",
                            "white"),
        "hat": ("none", "cap", "top hat"),
        "glasses": ("none", "glasses", "sunglasses"),
        "hair_colour": ("black", "brown", "blonde", "red", "grey"),
    },
    "place": {
        "building": ("house", "tower", "factory", "dome"),
        "roof_colour": ("red", "blue", "green", "black"),
        "windows": ("none", "two", "many"),
        "trees": ("none", "one", "two"),
        "time": ("day", "night"),
    },
}

KINDS = tuple(ATTRIBUTES)

# Saturated, mutually distant colours: each must survive 64 px, noise and the night filter.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (214, 34, 34), "orange": (247, 138, 10), "yellow": (246, 222, 30),
    "green": (36, 158, 58), "blue": (34, 78, 222), "purple": (132, 44, 178),
    "black": (22, 22, 24), "white": (246, 246, 244), "brown": (112, 66, 30),
    "blonde": (238, 206, 112), "grey": (160, 160, 164),
}
HAIR = {"black": PALETTE["black"], "brown": PALETTE["brown"], "blonde": PALETTE["blonde"],
        "red": (196, 72, 26), "grey": PALETTE["grey"]}
SKIN = ((250, 218, 190), (232, 184, 146), (198, 142, 104), (150, 102, 72))
NOUNS = {"product": ("product", "device", "item")}
SS = 2  # supersampling factor


def _check(kind: str, attributes: Mapping[str, str]) -> None:
    """Refuse an unknown kind or a missing/unknown attribute value, naming the allowed ones."""
    if kind not in ATTRIBUTES:
        raise ValueError(f"render: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    for attr, values in ATTRIBUTES[kind].items():
        if attr not in attributes:
            raise ValueError(f"render: {kind} attributes lack {attr!r} (one of {values})")
        if attributes[attr] not in values:
            raise ValueError(f"render: {kind}.{attr} = {attributes[attr]!r} is not one of {values}")
    extra = set(attributes) - set(ATTRIBUTES[kind])
    if extra:
        raise ValueError(f"render: unknown {kind} attributes {sorted(extra)}; "
                         f"expected {sorted(ATTRIBUTES[kind])}")


def sample_attributes(kind: str, rng: random.Random) -> dict[str, str]:
    """Uniform attribute values for one entity (a product's logo never matches its body)."""
    if kind not in ATTRIBUTES:
        raise ValueError(f"sample_attributes: unknown kind {kind!r}; expected one of {KINDS}")
    out = {attr: rng.choice(values) for attr, values in ATTRIBUTES[kind].items()}
    if kind == "product":
        logos = [c for c in ATTRIBUTES["product"]["logo_colour"] if c != out["colour"]]
        out["logo_colour"] = rng.choice(logos)
    return out


# --------------------------------------------------------------------------- helpers
def _jitter(rgb: tuple[int, int, int], rng: random.Random, amount: int = 12) -> tuple[int, ...]:
    """A colour a little off its palette value, so the encoder learns a colour, not a pixel."""
    return tuple(max(0, min(255, c + rng.randint(-amount, amount))) for c in rgb)


def _mix(a: tuple[int, ...], b: tuple[int, ...], t: float) -> tuple[int, ...]:
    return tuple(int(round(x + (y - x) * t)) for x, y in zip(a, b))


def _bright(rgb: tuple[int, ...]) -> float:
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def _background(w: int, rng: random.Random, lo: int, hi: int) -> Image.Image:
    """A tinted vertical gradient: a plain but not constant backdrop."""
    top = tuple(rng.randint(lo, hi) + rng.randint(-10, 10) for _ in range(3))
    bot = tuple(c + rng.randint(-30, 30) for c in top)
    ramp = np.linspace(0.0, 1.0, w, dtype=np.float32)[:, None, None]
    arr = np.array(top, np.float32) * (1 - ramp) + np.array(bot, np.float32) * ramp
    arr = np.broadcast_to(arr, (w, w, 3))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def _finish(img: Image.Image, size: int, seed: int, rng: random.Random) -> Image.Image:
    """Downsample, jitter brightness/contrast, add seeded Gaussian pixel noise."""
    img = img.resize((size, size), Image.Resampling.LANCZOS)
    arr = np.asarray(img, dtype=np.float32)
    gain, bias = rng.uniform(0.9, 1.1), rng.uniform(-12, 12)
    noise = np.random.default_rng(seed & 0xFFFFFFFF).normal(0.0, rng.uniform(3, 9), arr.shape)
    arr = (arr - 128.0) * gain + 128.0 + bias + noise
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def _paste_rotated(canvas: Image.Image, tile: Image.Image, cx: float, cy: float,
                   angle: float) -> None:
    """Rotate an RGBA tile about its centre and alpha-composite it centred at (cx, cy)."""
    tile = tile.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True)
    canvas.alpha_composite(tile, (int(round(cx - tile.width / 2)), int(round(cy - tile.height / 2))))


# --------------------------------------------------------------------------- products
def _body_mask(shape: str, t: int) -> tuple[Image.Image, list[tuple[float, float]]]:
    """The body silhouette in a t×t tile, and where the five logo positions fall on it."""
    mask = Image.new("L", (t, t), 0)
    d = ImageDraw.Draw(mask)
    if shape == "round":
        d.ellipse([0.08 * t, 0.08 * t, 0.92 * t, 0.92 * t], fill=255)
        xs, ys = (0.34, 0.66), (0.34, 0.66)
    elif shape == "square":
        d.rectangle([0.1 * t, 0.1 * t, 0.9 * t, 0.9 * t], fill=255)
        xs, ys = (0.3, 0.7), (0.3, 0.7)
    elif shape == "triangular":
        d.polygon([(0.5 * t, 0.04 * t), (0.03 * t, 0.93 * t), (0.97 * t, 0.93 * t)], fill=255)
        xs, ys = (0.36, 0.64), (0.52, 0.79)
    else:  # tall
        d.rounded_rectangle([0.26 * t, 0.03 * t, 0.74 * t, 0.97 * t], radius=0.06 * t, fill=255)
        xs, ys = (0.4, 0.6), (0.24, 0.76)
    spots = [(xs[0], ys[0]), (xs[1], ys[0]), (xs[0], ys[1]), (xs[1], ys[1]),
             ((xs[0] + xs[1]) / 2, (ys[0] + ys[1]) / 2)]
    return mask, [(x * t, y * t) for x, y in spots]


def _pattern_layer(pattern: str, t: int, colour: tuple[int, ...], rng: random.Random) -> Image.Image:
    """The surface pattern over a whole tile (clipped to the body by the caller)."""
    layer = Image.new("RGBA", (t, t), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    p = t / rng.uniform(4.2, 5.0)  # period: 4-5 repeats across the body
    off = rng.uniform(0, p)
    n = int(t / p) + 2
    fill = (*colour, 255)
    if pattern == "striped":
        for i in range(-1, n):
            y = off + i * p
            d.rectangle([0, y, t, y + p * 0.48], fill=fill)
    elif pattern == "dotted":
        r = p * 0.22
        for i in range(-1, n):
            for j in range(-1, n):
                x, y = off + i * p + (p / 2 if j % 2 else 0), off + j * p
                d.ellipse([x - r, y - r, x + r, y + r], fill=fill)
    elif pattern == "checked":
        q = p / 2
        for i in range(-2, 2 * n):
            for j in range(-2, 2 * n):
                if (i + j) % 2 == 0:
                    d.rectangle([off + i * q - q, off + j * q - q, off + i * q, off + j * q],
                                fill=fill)
    return layer


def _product_tile(a: Mapping[str, str], t: int, rng: random.Random) -> Image.Image:
    """One product unit: outlined body, clipped pattern, round logo at its position."""
    body = _jitter(PALETTE[a["colour"]], rng)
    toward = (0, 0, 0) if _bright(body) > 140 else (255, 255, 255)
    pat = _mix(body, toward, 0.42)
    mask, spots = _body_mask(a["shape"], t)
    fill = Image.new("RGBA", (t, t), (*body, 255))
    fill.alpha_composite(_pattern_layer(a["pattern"], t, pat, rng))
    tile = Image.new("RGBA", (t, t), (0, 0, 0, 0))
    outline = Image.new("RGBA", (t, t), (30, 30, 34, 255))
    tile.paste(outline, (0, 0), mask.filter(ImageFilter.MaxFilter(2 * max(1, t // 40) + 1)))
    tile.paste(fill, (0, 0), mask)
    pos = ATTRIBUTES["product"]["logo_position"].index(a["logo_position"])
    lx, ly = spots[pos]
    r = 0.12 * t
    logo = _jitter(PALETTE[a["logo_colour"]], rng, 8)
    ImageDraw.Draw(tile).ellipse([lx - r, ly - r, lx + r, ly + r], fill=(*logo, 255))
    return tile


_SLOTS = {"one": [(0.5, 0.5)], "two": [(0.28, 0.5), (0.72, 0.5)],
          "three": [(0.27, 0.3), (0.73, 0.3), (0.5, 0.73)]}
_UNIT = {"one": (0.58, 0.72), "two": (0.42, 0.48), "three": (0.38, 0.44)}


def _draw_product(a: Mapping[str, str], w: int, rng: random.Random) -> Image.Image:
    canvas = _background(w, rng, 120, 200).convert("RGBA")
    slots = list(_SLOTS[a["count"]])
    if a["count"] == "three" and rng.random() < 0.5:  # upside-down arrangement
        slots = [(x, 1 - y) for x, y in slots]
    dx, dy = rng.uniform(-0.06, 0.06), rng.uniform(-0.06, 0.06)
    scale = rng.uniform(*_UNIT[a["count"]])
    for sx, sy in slots:
        t = int(scale * w * rng.uniform(0.95, 1.05))
        tile = _product_tile(a, t, rng)
        cx = (sx + dx + rng.uniform(-0.02, 0.02)) * w
        cy = (sy + dy + rng.uniform(-0.02, 0.02)) * w
        _paste_rotated(canvas, tile, cx, cy, rng.uniform(-14, 14))
    return canvas.convert("RGB")


# --------------------------------------------------------------------------- people
def _draw_person(a: Mapping[str, str], w: int, rng: random.Random) -> Image.Image:
    canvas = _background(w, rng, 150, 225).convert("RGBA")
    layer = Image.new("RGBA", (w, w), (0, 0, 0, 0))
    d = ImageDraw.Draw(layer)
    ink = (28, 28, 32, 255)
    lw = max(1, w // 64)
    cloth = (*_jitter(PALETTE[a["clothing_colour"]], rng), 255)
    hair = (*_jitter(HAIR[a["hair_colour"]], rng), 255)
    skin = (*_jitter(rng.choice(SKIN), rng, 6), 255)
    cx, hy, hr = 0.5 * w, 0.4 * w, 0.17 * w  # head centre and radius
    # torso with shoulders, then neck
    d.rounded_rectangle([cx - 0.34 * w, 0.66 * w, cx + 0.34 * w, 1.2 * w], radius=0.12 * w,
                        fill=cloth, outline=ink, width=lw)
    d.rectangle([cx - 0.06 * w, hy + hr * 0.7, cx + 0.06 * w, 0.68 * w], fill=skin)
    # hair behind the head: visible on top and at the sides, even under a hat
    d.rounded_rectangle([cx - hr * 1.32, hy - hr * 1.28, cx + hr * 1.32, hy + hr * 1.5],
                        radius=hr * 0.9, fill=hair, outline=ink, width=lw)
    d.ellipse([cx - hr, hy - hr * 0.9, cx + hr, hy + hr * 1.05], fill=skin, outline=ink, width=lw)
    ey, ex = hy + 0.02 * w, 0.075 * w
    for s in (-1, 1):
        d.ellipse([cx + s * ex - 0.013 * w, ey - 0.013 * w, cx + s * ex + 0.013 * w,
                   ey + 0.013 * w], fill=ink)
    d.arc([cx - 0.06 * w, hy + 0.05 * w, cx + 0.06 * w, hy + 0.11 * w], 20, 160, fill=ink,
          width=lw)
    if a["glasses"] != "none":
        gr, gw = 0.062 * w, max(2, w // 30)
        for s in (-1, 1):
            box = [cx + s * ex - gr, ey - gr, cx + s * ex + gr, ey + gr]
            if a["glasses"] == "sunglasses":
                d.ellipse(box, fill=(14, 14, 18, 255))
            else:
                d.ellipse(box, outline=(20, 20, 24, 255), width=gw)
        d.line([cx - ex + gr, ey, cx + ex - gr, ey], fill=(20, 20, 24, 255), width=gw)
    hat = (*_jitter(rng.choice(((48, 48, 56), (92, 62, 40), (40, 58, 92), (70, 70, 70))), rng, 8),
           255)
    if a["hat"] == "cap":
        d.chord([cx - hr * 1.08, hy - hr * 1.45, cx + hr * 1.08, hy + hr * 0.3], 180, 360,
                fill=hat, outline=ink, width=lw)
        side = rng.choice((-1, 1))
        x0, x1 = sorted((cx, cx + side * hr * 1.75))
        d.rectangle([x0, hy - hr * 0.6, x1, hy - hr * 0.42], fill=hat, outline=ink, width=lw)
    elif a["hat"] == "top hat":
        d.rectangle([cx - hr * 1.45, hy - hr * 0.95, cx + hr * 1.45, hy - hr * 0.75], fill=hat,
                    outline=ink, width=lw)
        d.rectangle([cx - hr * 0.85, hy - hr * 2.35, cx + hr * 0.85, hy - hr * 0.85], fill=hat,
                    outline=ink, width=lw)
    scale = rng.uniform(0.82, 1.0)
    layer = layer.resize((int(w * scale), int(w * scale)), Image.Resampling.BICUBIC)
    _paste_rotated(canvas, layer, w * (0.5 + rng.uniform(-0.08, 0.08)),
                   w * (0.5 + (1 - scale) / 2 + rng.uniform(-0.03, 0.05)), rng.uniform(-6, 6))
    return canvas.convert("RGB")


# --------------------------------------------------------------------------- places
_WALLS = ((226, 206, 170), (202, 202, 204), (236, 234, 222), (228, 190, 168))
_BUILDINGS = {"house": (0.46, 0.3), "tower": (0.22, 0.56), "factory": (0.62, 0.26),
              "dome": (0.46, 0.24)}


def _draw_place(a: Mapping[str, str], w: int, rng: random.Random) -> Image.Image:
    night = a["time"] == "night"
    img = Image.new("RGB", (w, w))
    d = ImageDraw.Draw(img)
    sky_top = (12, 16, 48) if night else (112, 170, 232)
    sky_bot = (36, 42, 92) if night else (186, 216, 246)
    ground_y = int(w * rng.uniform(0.76, 0.82))
    for y in range(ground_y):
        d.line([0, y, w, y], fill=_jitter(_mix(sky_top, sky_bot, y / ground_y), rng, 0))
    ground = _jitter((40, 86, 40) if night else (104, 170, 80), rng, 10)
    d.rectangle([0, ground_y, w, w], fill=ground)
    # sun or moon and stars
    sx, sy, sr = rng.uniform(0.1, 0.9) * w, rng.uniform(0.08, 0.2) * w, 0.06 * w
    if night:
        for _ in range(rng.randint(5, 12)):
            x, y = rng.uniform(0, w), rng.uniform(0, ground_y * 0.6)
            d.ellipse([x - 1.5 * SS, y - 1.5 * SS, x + 1.5 * SS, y + 1.5 * SS], fill=(230, 230, 210))
        d.ellipse([sx - sr, sy - sr, sx + sr, sy + sr], fill=(236, 236, 214))
        d.ellipse([sx - sr + 0.4 * sr, sy - sr - 0.2 * sr, sx + sr + 0.4 * sr, sy + sr - 0.2 * sr],
                  fill=sky_top)
    else:
        d.ellipse([sx - sr, sy - sr, sx + sr, sy + sr], fill=(252, 226, 70))
    ink = (30, 30, 34)
    lw = max(1, w // 64)
    bw, bh = _BUILDINGS[a["building"]]
    s = rng.uniform(0.9, 1.08)
    bw, bh = bw * s * w, bh * s * w
    cx = w * (0.5 + rng.uniform(-0.05, 0.05))
    x0, x1, y1 = cx - bw / 2, cx + bw / 2, ground_y + 0.02 * w
    y0 = y1 - bh
    wall = _jitter(rng.choice(_WALLS), rng, 8)
    roof = _jitter(PALETTE[a["roof_colour"]], rng, 10)
    b = a["building"]
    if b == "house":
        d.polygon([(x0 - 0.04 * w, y0), (cx, y0 - 0.2 * w), (x1 + 0.04 * w, y0)], fill=roof,
                  outline=ink, width=lw)
    elif b == "tower":
        d.polygon([(x0 - 0.02 * w, y0), (cx, y0 - 0.16 * w), (x1 + 0.02 * w, y0)], fill=roof,
                  outline=ink, width=lw)
    elif b == "factory":
        cxm = x1 - 0.12 * w
        d.rectangle([cxm, y0 - 0.24 * w, cxm + 0.06 * w, y0], fill=(120, 110, 110), outline=ink,
                    width=lw)
        n = 3
        for i in range(n):
            tx0 = x0 + i * bw / n
            d.polygon([(tx0, y0), (tx0, y0 - 0.12 * w), (tx0 + bw / n, y0)], fill=roof,
                      outline=ink, width=lw)
    else:  # dome
        d.chord([x0, y0 - bw / 2, x1, y0 + bw / 2], 180, 360, fill=roof, outline=ink, width=lw)
    d.rectangle([x0, y0, x1, y1], fill=wall, outline=ink, width=lw)
    # windows: a grid for "many", one pair for "two"
    lit = (252, 222, 96) if night else (176, 206, 232)
    ww = 0.065 * w
    if a["windows"] == "two":
        cells = [(0.3, 0.42), (0.7, 0.42)] if b != "tower" else [(0.5, 0.3), (0.5, 0.62)]
    elif a["windows"] == "many":
        cols = (0.25, 0.75) if b == "tower" else ((0.14, 0.38, 0.62, 0.86) if b == "factory"
                                                 else (0.2, 0.5, 0.8))
        rows = (0.16, 0.38, 0.6, 0.82) if b == "tower" else (0.3, 0.66)
        cells = [(c, r) for r in rows for c in cols]
    else:
        cells = []
    for fx, fy in cells:
        wx, wy = x0 + fx * bw, y0 + fy * bh
        d.rectangle([wx - ww / 2, wy - ww / 2, wx + ww / 2, wy + ww / 2], fill=_jitter(lit, rng, 8),
                    outline=ink, width=lw)
    # trees in front, beside the building
    n_trees = {"none": 0, "one": 1, "two": 2}[a["trees"]]
    sides = rng.sample([-1, 1], 2)
    leaf = (24, 90, 36) if night else (38, 128, 48)
    for k in range(n_trees):
        tx = w * (0.5 + sides[k] * rng.uniform(0.36, 0.42))
        ty, tr = ground_y + 0.04 * w, rng.uniform(0.08, 0.1) * w
        d.rectangle([tx - 0.018 * w, ty - 1.6 * tr, tx + 0.018 * w, ty], fill=(100, 64, 30))
        d.ellipse([tx - tr, ty - 2.9 * tr, tx + tr, ty - 0.9 * tr], fill=_jitter(leaf, rng, 10),
                  outline=ink, width=lw)
    if night:  # dim everything but the sky's dark blue and the lit windows keep their contrast
        arr = np.asarray(img, dtype=np.float32) * 0.8
        img = Image.fromarray(arr.astype(np.uint8), "RGB")
    return img


_DRAW = {"product": _draw_product, "person": _draw_person, "place": _draw_place}


def render(kind: str, attributes: Mapping[str, str], seed: int, size: int) -> Image.Image:
    """An RGB picture of an entity with these attributes; the seed picks jitter and noise."""
    _check(kind, attributes)
    if size < 16:
        raise ValueError(f"render: size {size} is too small to show attributes (use >= 16)")
    rng = random.Random(f"{kind}:{seed}")
    img = _DRAW[kind](attributes, size * SS, rng)
    return _finish(img, size, seed, rng)


# --------------------------------------------------------------------------- captions
def _place_phrase(attr: str, value: str) -> str:
    """The words a caption uses for one attribute value of a place (generic: never a name)."""
    return {"building": value, "roof_colour": f"a {value} roof",
            "windows": "no windows" if value == "none" else f"{value} windows",
            "trees": {"none": "no trees", "one": "one tree", "two": "two trees"}.get(value, value),
            "time": "at night" if value == "night" else "by day"}[attr]


def _product_caption(a: Mapping[str, str], rng: random.Random) -> str:
    noun = rng.choice(NOUNS["product"])
    count = a.get("count")
    plural = count in ("two", "three")
    adj = [a[k] for k in ("pattern", "colour", "shape") if k in a]
    head = " ".join(([count] if count else ["a"]) + adj + [noun + ("s" if plural else "")])
    if head.startswith("a ") and head[2] in "aeiou":
        head = "an " + head[2:]
    logo = ""
    if "logo_colour" in a or "logo_position" in a:
        colour = f"{a['logo_colour']} " if "logo_colour" in a else ""
        where = ""
        if "logo_position" in a:
            pos = a["logo_position"]
            where = " in the center" if pos == "center" else f" at the {pos}"
        logo = f"{'each with' if plural else 'with'} a {colour}logo{where}"
    lead = rng.choice(("a photo of ", "a picture of ", "", "an image of "))
    return (lead + head + (" " + logo if logo else "")).strip()


def _person_caption(a: Mapping[str, str], rng: random.Random) -> str:
    parts = []
    if "clothing_colour" in a:
        parts.append(f"wearing {a['clothing_colour']} clothes")
    if "hair_colour" in a:
        parts.append(f"with {a['hair_colour']} hair")
    if "hat" in a:
        parts.append("with no hat" if a["hat"] == "none" else f"wearing a {a['hat']}")
    if "glasses" in a:
        parts.append("without glasses" if a["glasses"] == "none" else
                     f"wearing {a['glasses']}")
    rng.shuffle(parts)
    noun = rng.choice(("a person", "someone", "a man or woman"))
    lead = rng.choice(("a photo of ", "a picture of ", ""))
    return lead + noun + " " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1
                                else parts[0])


def _place_caption(a: Mapping[str, str], rng: random.Random) -> str:
    head = a.get("building", rng.choice(("building", "site")))
    bits = []
    if "roof_colour" in a:
        bits.append(_place_phrase("roof_colour", a["roof_colour"]))
    if "windows" in a:
        bits.append(_place_phrase("windows", a["windows"]))
    if "trees" in a:
        bits.append(_place_phrase("trees", a["trees"]))
    rng.shuffle(bits)
    text = f"a {head}"
    if bits:
        text += " with " + (", ".join(bits[:-1]) + " and " + bits[-1] if len(bits) > 1 else bits[0])
    if "time" in a:
        text += " " + _place_phrase("time", a["time"])
    lead = rng.choice(("a photo of ", "a picture of ", ""))
    return lead + text


def caption(kind: str, attributes: Mapping[str, str], rng: random.Random,
            drop: float) -> tuple[str, dict[str, str]]:
    """A generic caption and the attributes it states (all, or with probability ``drop`` some).

    Knowing which attributes a caption states lets a contrastive loss count every image that
    shares them as a positive, instead of pushing a partial caption away from its matches.
    """
    _check(kind, attributes)
    if not 0.0 <= drop <= 1.0:
        raise ValueError(f"describe: drop = {drop} must lie in [0, 1]")
    keep = dict(attributes)
    if rng.random() < drop:
        names = list(attributes)
        chosen = [n for n in names if rng.random() < 0.5] or [rng.choice(names)]
        keep = {n: attributes[n] for n in chosen}
    return phrase(kind, keep, rng), keep


def phrase(kind: str, stated: Mapping[str, str], rng: random.Random) -> str:
    """A caption that states exactly ``stated`` (any non-empty subset of the kind's attributes)."""
    known = ATTRIBUTES.get(kind)
    if known is None or not stated or any(known.get(k) is None or v not in known[k]
                                          for k, v in stated.items()):
        raise ValueError(f"phrase: {dict(stated)} is not a non-empty set of {kind} attributes")
    return {"product": _product_caption, "person": _person_caption,
            "place": _place_caption}[kind](stated, rng)


def describe(kind: str, attributes: Mapping[str, str], rng: random.Random, drop: float) -> str:
    """A generic caption of the attributes; with probability ``drop`` it states only some of them.

    Partial captions matter: when every caption names the body colour, a prompt about the logo
    colour alone is answered with the body colour (a CLIP gotcha).
    """
    return caption(kind, attributes, rng, drop)[0]


def prompts(kind: str, attr: str, value: str) -> list[str]:
    """Zero-shot prompts that state one attribute value alone (for scoring every value)."""
    if kind not in ATTRIBUTES or attr not in ATTRIBUTES[kind]:
        raise ValueError(f"prompts: unknown attribute {kind}.{attr}")
    if value not in ATTRIBUTES[kind][attr]:
        raise ValueError(f"prompts: {kind}.{attr} has no value {value!r}")
    one = {attr: value}
    make = {"product": _product_caption, "person": _person_caption, "place": _place_caption}[kind]
    out = []
    for lead_seed in range(3):
        text = make(one, random.Random(lead_seed))
        if text not in out:
            out.append(text)
    return out
