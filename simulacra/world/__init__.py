"""The town: places, paths, objects, events, clock settings and residents (``worlds/<name>.yaml``)."""

from simulacra.world.model import Event, Place, World, WorldObject, check_world, load_world

__all__ = ["Event", "Place", "World", "WorldObject", "check_world", "load_world"]
