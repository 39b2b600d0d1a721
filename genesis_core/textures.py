"""Textures (`gs.textures.ColorTexture`, `ImageTexture`, `BatchTexture`), Genesis World's, given to a surface's
`diffuse_texture`, `emissive_texture`, ... (`gs.surfaces.Default(diffuse_texture=gs.textures.ColorTexture(
color=(1.0, 0.5, 0.0)))`).

The cameras here draw each entity in one colour (genesis_core.render.view.entity_color): a surface without a
`color` takes its diffuse texture's, else its emissive texture's, as `Texture.mean_color` gives it: a colour
texture's colour; an image's mean colour (decoded from sRGB when `encoding="srgb"`, averaged in linear light and
encoded again) times `image_color`; a batch's first texture's. An image is read only when a camera first asks.
The values are checked when the texture is made: a bad colour, path or encoding raises gs.OptionError then."""

from __future__ import annotations

import os

import numpy as np

from .errors import OptionError


def _unit_values(value, what, min_len=1):
    try:
        x = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise OptionError(f"{what}={value!r}: expected numbers in [0, 1].") from None
    if x.size < min_len or not np.all(np.isfinite(x)) or np.any(x < 0.0) or np.any(x > 1.0):
        raise OptionError(f"{what}={value!r}: expected {min_len} or more numbers in [0, 1].")
    return tuple(float(c) for c in x)


class Texture:
    """Base of the textures (not made directly)."""

    def mean_color(self):
        """The RGB colour (3 floats in [0, 1]) the cameras draw the texture as, or None for none."""
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"gs.textures.{type(self).__name__}({args})"


class ColorTexture(Texture):
    """One colour: `color`, any number of channels in [0, 1] (default white, (1, 1, 1))."""

    def __init__(self, color=(1.0, 1.0, 1.0)):
        self.color = _unit_values(color, "ColorTexture(color)")

    def mean_color(self):
        c = self.color
        return np.asarray((c * 3)[:3] if len(c) == 1 else c[:3], dtype=np.float64)


def _srgb_to_linear(c):
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(c):
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(np.maximum(c, 0.0), 1 / 2.4) - 0.055)


class ImageTexture(Texture):
    """An image: `image_path` (a file, read when first drawn) or `image_array` (H x W [x C], uint8 0-255 or floats
    in [0, 1]), exactly one; `image_color`, a factor on its colour (one number or one per channel, in [0, 1]);
    `encoding`, "srgb" (colour images, the default) or "linear" (data such as roughness or normals)."""

    def __init__(self, image_path=None, image_array=None, image_color=None, encoding="srgb"):
        if (image_path is None) == (image_array is None):
            raise OptionError("ImageTexture: give exactly one of image_path and image_array.")
        if image_path is not None:
            if not isinstance(image_path, (str, os.PathLike)):
                raise OptionError(f"ImageTexture(image_path={image_path!r}): expected a path.")
            from .morphs import find_file

            path, looked = find_file(image_path)
            if path is None:
                raise OptionError(f"ImageTexture(image_path={image_path!r}): no such file (looked in {looked}).")
            image_path = path
        else:
            arr = np.asarray(image_array)
            if arr.ndim not in (2, 3) or arr.size == 0 or (arr.ndim == 3 and arr.shape[2] not in (1, 2, 3, 4)):
                raise OptionError(f"ImageTexture(image_array): expected an H x W or H x W x C (C 1-4) image, got "
                                  f"shape {arr.shape}.")
            if arr.dtype.kind not in "uif" or not np.all(np.isfinite(arr)):
                raise OptionError("ImageTexture(image_array): expected finite numbers.")
            image_array = arr
        self.image_path, self.image_array = image_path, image_array
        self.image_color = None if image_color is None else _unit_values(image_color, "ImageTexture(image_color)")
        enc = str(encoding).lower()
        if enc not in ("srgb", "linear"):
            raise OptionError(f"ImageTexture(encoding={encoding!r}): expected 'srgb' or 'linear'.")
        self.encoding = enc
        self._mean = None

    def _pixels(self):
        if self.image_array is not None:
            arr = np.asarray(self.image_array)
        else:
            try:
                from PIL import Image
            except ImportError:  # pragma: no cover - Pillow comes with the render extra
                return None
            try:
                with Image.open(self.image_path) as im:
                    arr = np.asarray(im.convert("RGBA") if im.mode in ("P", "LA") else im)
            except OSError as exc:
                raise OptionError(f"ImageTexture(image_path={self.image_path!r}): cannot read the image "
                                  f"({exc}).") from None
        arr = arr.astype(np.float64) / (255.0 if arr.dtype.kind in "ui" else 1.0)
        if arr.ndim == 2:
            arr = arr[..., None]
        rgb = np.repeat(arr[..., :1], 3, axis=-1) if arr.shape[-1] < 3 else arr[..., :3]
        return np.clip(rgb, 0.0, 1.0).reshape(-1, 3)

    def mean_color(self):
        if self._mean is None:
            rgb = self._pixels()
            if rgb is None:
                return None
            if self.encoding == "srgb":
                mean = _linear_to_srgb(_srgb_to_linear(rgb).mean(0))
            else:
                mean = rgb.mean(0)
            if self.image_color is not None:
                f = np.asarray(self.image_color)
                mean = mean * (np.repeat(f, 3) if f.size == 1 else f[:3])
            self._mean = np.clip(mean, 0.0, 1.0)
        return self._mean


class BatchTexture(Texture):
    """A batch of textures (Genesis World's batch renderer gives each environment one); the cameras here draw
    every environment with the first. `textures`: textures or None."""

    def __init__(self, textures=()):
        textures = list(textures)
        bad = [t for t in textures if t is not None and not isinstance(t, Texture)]
        if bad:
            raise OptionError(f"BatchTexture(textures): expected gs.textures.* or None, got {bad[0]!r}.")
        self.textures = textures

    @staticmethod
    def from_images(image_paths=None, image_folder=None, image_arrays=None, image_colors=None, encoding="srgb"):
        sources = [x for x in (image_paths, image_folder, image_arrays) if x is not None]
        if len(sources) != 1:
            raise OptionError("BatchTexture.from_images: give exactly one of image_paths, image_folder, "
                              "image_arrays.")
        if image_folder is not None:
            if not os.path.isdir(image_folder):
                raise OptionError(f"BatchTexture.from_images(image_folder={image_folder!r}): no such folder.")
            image_paths = sorted(os.path.join(image_folder, f) for f in os.listdir(image_folder)
                                 if f.lower().endswith((".png", ".jpg", ".jpeg", ".bmp", ".tga", ".tif", ".tiff")))
        items = list(image_paths if image_paths is not None else image_arrays)
        colors = list(image_colors) if image_colors is not None else [None] * len(items)
        if len(colors) != len(items):
            raise OptionError(f"BatchTexture.from_images: {len(colors)} image_colors for {len(items)} images.")
        key = "image_path" if image_paths is not None else "image_array"
        return BatchTexture([ImageTexture(**{key: x}, image_color=c, encoding=encoding)
                             for x, c in zip(items, colors)])

    def mean_color(self):
        for t in self.textures:
            if t is not None:
                return t.mean_color()
        return None


__all__ = ["BatchTexture", "ColorTexture", "ImageTexture", "Texture"]
