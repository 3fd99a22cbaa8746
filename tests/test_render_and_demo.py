"""Top-down rendering and the scripted two-agent demo that ``make run`` starts."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from benchmark.media import demo as demo
from benchmark.sim import Controller
from benchmark.sim.render import AGENT_COLOURS, save_gif, save_png, top_down
from benchmark.sim.world import HEADINGS


def _pixel_behind(world, agent, image: Image.Image, ppm: int = 80, margin: float = 0.5):
    """The pixel a little behind the agent's centre (its heading line runs forwards)."""
    x0, _, _, z1 = world.scene.bounds
    dx, dz = HEADINGS[agent.rotation]
    x, z = agent.i * 0.25 - 0.08 * dx, agent.j * 0.25 - 0.08 * dz
    return image.getpixel((int((x - x0 + margin) * ppm), int((z1 + margin - z) * ppm)))


def test_the_top_down_map_shows_each_agent_in_its_colour(tmp_path: Path) -> None:
    c = Controller(scene="FloorPlan1", agentCount=3, seed=1)
    path = tmp_path / "map.png"
    save_png(c.world, path)
    image = Image.open(path)
    assert image.format == "PNG" and image.size[0] > 200
    for k, agent in enumerate(c.world.agents):
        assert _pixel_behind(c.world, agent, image.convert("RGB")) == AGENT_COLOURS[k]


def test_a_map_without_agents_leaves_their_cells_as_floor() -> None:
    c = Controller(scene="FloorPlan1", agentCount=3, seed=1)
    bare = top_down(c.world, agents=False)
    for agent in c.world.agents:
        assert _pixel_behind(c.world, agent, bare) not in AGENT_COLOURS


def test_the_map_changes_when_an_agent_moves_and_a_gif_holds_every_frame(tmp_path: Path) -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    frames = [top_down(c.world)]
    for action in ("RotateLeft", "MoveAhead", "MoveAhead"):
        c.step(action=action)
        frames.append(top_down(c.world))
    assert frames[0].tobytes() != frames[1].tobytes()
    save_gif(frames, tmp_path / "episode.gif")
    gif = Image.open(tmp_path / "episode.gif")
    assert gif.n_frames >= 2


def test_the_demo_puts_the_apple_in_the_fridge_and_writes_a_map(tmp_path: Path, capsys) -> None:
    assert demo.run(out_dir=str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "success=True" in out and "agent 0  OpenObject" in out and "agent 1  PutObject" in out
    assert (tmp_path / "FloorPlan1_final.png").is_file()
