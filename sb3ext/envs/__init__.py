"""Gymnasium registrations of sb3ext's environments.

String entry points only: importing this module imports neither pybullet nor the env classes.
Ids are namespaced (``sb3ext/...``); bump ``-vN`` on any change of dynamics, reward, observations,
assets or episode length.
"""

from gymnasium.envs.registration import register, registry

_CARTPOLE = "sb3ext.envs.cartpole:BulletCartPoleEnv"
_PLATE = "sb3ext.envs.plate:BulletBallPlateEnv"

ENV_IDS: dict[str, tuple[str, int, dict]] = {
    "sb3ext/CartPole-v0": (_CARTPOLE, 500, {"continuous": False}),
    "sb3ext/CartPoleContinuous-v0": (_CARTPOLE, 500, {"continuous": True}),
    "sb3ext/CartPolePixels-v1": (_CARTPOLE, 500, {"continuous": False, "obs_type": "pixels"}),
    "sb3ext/CartPolePixels-v2": (_CARTPOLE, 500, {"continuous": False, "obs_type": "pixels", "supersample": 4}),
    "sb3ext/BallPlate-v0": (_PLATE, 500, {"continuous": False}),
    "sb3ext/BallPlateContinuous-v0": (_PLATE, 500, {"continuous": True}),
    "sb3ext/BallPlatePixels-v0": (_PLATE, 500, {"continuous": True, "obs_type": "pixels"}),
    "sb3ext/BallPlatePixels-v1": (_PLATE, 500, {"continuous": True, "obs_type": "pixels_joints"}),
}

for _env_id, (_entry_point, _max_steps, _kwargs) in ENV_IDS.items():
    if _env_id not in registry:
        register(id=_env_id, entry_point=_entry_point, max_episode_steps=_max_steps, kwargs=_kwargs)
