"""gs.textures (Genesis World's ColorTexture, ImageTexture, BatchTexture): checked when made, drawn as their colour
by the cameras where a surface gives no `color`; and Genesis World's top-level geometry helpers (gs.inv_quat, ...)."""

import numpy as np
import pytest
import torch

import genesis_core as gs


def test_colours_of_textures():
    assert gs.textures.ColorTexture(color=(1.0, 0.5, 0.0)).mean_color().tolist() == [1.0, 0.5, 0.0]
    assert gs.textures.ColorTexture(color=(0.25,)).mean_color().tolist() == [0.25] * 3
    img = np.zeros((4, 4, 3), dtype=np.uint8)
    img[:2] = 255
    # half white, half black, in sRGB: the mean light is half, encoded back as 0.7354
    srgb = gs.textures.ImageTexture(image_array=img).mean_color()
    assert np.allclose(srgb, 1.055 * 0.5 ** (1 / 2.4) - 0.055)
    linear = gs.textures.ImageTexture(image_array=img, encoding="LINEAR", image_color=(1.0, 0.5, 0.5)).mean_color()
    assert np.allclose(linear, [0.5, 0.25, 0.25])
    batch = gs.textures.BatchTexture.from_images(image_arrays=[img, img[::-1]])
    assert np.allclose(batch.mean_color(), srgb) and len(batch.textures) == 2


def test_image_file(tmp_path):
    from PIL import Image

    path = tmp_path / "red.png"
    Image.fromarray(np.full((3, 5, 3), (255, 0, 0), dtype=np.uint8)).save(path)
    assert np.allclose(gs.textures.ImageTexture(image_path=str(path)).mean_color(), [1.0, 0.0, 0.0])
    folder = gs.textures.BatchTexture.from_images(image_folder=str(tmp_path))
    assert np.allclose(folder.mean_color(), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("make, match", [
    (lambda: gs.textures.ColorTexture(color=(1.5, 0.0, 0.0)), "in \\[0, 1\\]"),
    (lambda: gs.textures.ColorTexture(color=(float("nan"),)), "in \\[0, 1\\]"),
    (lambda: gs.textures.ColorTexture(color="red"), "numbers"),
    (lambda: gs.textures.ImageTexture(), "exactly one"),
    (lambda: gs.textures.ImageTexture(image_path="no/such.png"), "no such file"),
    (lambda: gs.textures.ImageTexture(image_array=np.zeros((2, 2, 7))), "shape"),
    (lambda: gs.textures.ImageTexture(image_array=np.zeros((2, 2)), encoding="gamma"), "encoding"),
    (lambda: gs.textures.BatchTexture([1.0]), "gs.textures"),
])
def test_bad_textures_are_refused(make, match):
    with pytest.raises(gs.OptionError, match=match):
        make()


def test_camera_draws_the_diffuse_texture_colour():
    scene = gs.Scene()
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.5), fixed=True),
                     surface=gs.surfaces.Default(diffuse_texture=gs.textures.ColorTexture(color=(1.0, 0.5, 0.0))))
    cam = scene.add_camera(res=(32, 24), pos=(0, -2, 0.5), lookat=(0, 0, 0.5))
    scene.build()
    r, g, b = (int(x) for x in cam.render()[0][12, 16])
    assert r > 0 and b == 0 and abs(g / r - 0.5) < 0.02  # the texture's hue, shaded


def test_top_level_geometry_helpers():
    q = torch.tensor([0.5, 0.5, 0.5, 0.5], dtype=torch.float64)
    assert torch.allclose(gs.transform_quat_by_quat(gs.inv_quat(q), q), torch.tensor([1.0, 0, 0, 0],
                                                                                      dtype=torch.float64))
    assert torch.allclose(gs.quat_to_rotvec(gs.rotvec_to_quat(torch.tensor([0.1, -0.2, 0.3]))),
                          torch.tensor([0.1, -0.2, 0.3]), atol=1e-6)
    assert gs.inv_quat is gs.utils.geom.inv_quat
