"""Every policy is scored on its env's own rewards, whatever wrappers it acts in; Atari games are scored as games: the
sum of the game's own rewards over all its lives.

A learner's wrappers may change what it trains on: the zoo's ``AtariWrapper`` ends an episode at each lost life and
clips rewards to their sign, and a reward wrapper (``gymnasium.wrappers.ClipReward``) changes the rewards. The
harness evaluates every policy (expert, random, each checkpoint) in its own wrappers, with :class:`GameScore` under
them (the env's rewards) and :class:`FullGame` over them (in a game, a lost life goes on with the wrappers' own reset,
which presses FIRE where the game needs it). An episode ends when the env's does, or after :data:`MAX_GAME_FRAMES`
steps, five minutes of an Atari game's play, so that a deterministic policy stuck in a loop ends.

The emulator is deterministic, and the zoo's ``NoFrameskip-v4`` games repeat no action: a deterministic policy then
plays only a handful of distinct games whatever the seed (a Breakout learner's 30 seeded games were 4 games, 13 times
the same one). Evaluated games use sticky actions instead (:data:`STICKY_ACTIONS`, the protocol of Machado et al.,
2018), seeded with each episode, so that each seed plays its own game.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

#: frames of one evaluated game at most: five minutes of play at 60 frames per second
MAX_GAME_FRAMES = 18_000
#: the chance that the emulator repeats the previous action instead of the one given, in every evaluated game
STICKY_ACTIONS = 0.25


def is_atari(env: gym.Env) -> bool:
    """Whether ``env`` is an ALE game (its unwrapped env has an ``ale`` interface)."""
    return hasattr(env.unwrapped, "ale")


class GameScore(gym.Wrapper):
    """Innermost: adds ``info["game_score"]``, the game's unclipped rewards since the game began, and
    ``info["game_frames"]``."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.score, self.frames = 0.0, 0

    def reset(self, **kwargs: Any) -> Any:
        self.score, self.frames = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.frames += 1
        return obs, reward, terminated, truncated, {**info, "game_score": self.score, "game_frames": self.frames}


class FullGame(gym.Wrapper):
    """Outermost: one episode is one game. Rewards are the env's own (from :class:`GameScore`); an episode that the
    wrappers end at a lost life goes on from their reset; the game is cut at :data:`MAX_GAME_FRAMES`."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.scored = 0.0

    def reset(self, **kwargs: Any) -> Any:
        """A new game. A game cut at :data:`MAX_GAME_FRAMES` is not over for SB3's ``EpisodicLifeEnv``, which would
        go on with it (one no-op step) instead of starting the emulator again: it is told that the game is over."""
        self.scored = 0.0
        self.env.set_wrapper_attr("was_real_done", True, force=False)  # no-op where no such wrapper is
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, _, terminated, truncated, info = self.env.step(action)
        reward, self.scored = info["game_score"] - self.scored, info["game_score"]
        over = info["game_frames"] >= MAX_GAME_FRAMES
        if terminated and not truncated and not over and info.get("lives", 0) > 0:
            obs, reset_info = self.env.reset()  # a life lost: the wrappers' soft reset, not a new game
            info = {**info, **reset_info}
            terminated = False
        return obs, reward, terminated, truncated or over, info


def make(env_id: str, **make_kwargs: Any) -> gym.Env:
    """``gym.make``; an id that gymnasium does not know yet registers the env packages first (ale-py's games, the
    PyBullet locomotion envs: ``sb3ext.experts.expert.ENV_PACKAGES``, as the zoo imports them)."""
    try:
        return gym.make(env_id, **make_kwargs)
    except gym.error.NameNotFound:
        from sb3ext.experts.expert import import_env_packages

        import_env_packages()
        return gym.make(env_id, **make_kwargs)


def scored_env(env_id: str, wrap: Callable[[gym.Env], gym.Env], **make_kwargs: Any) -> gym.Env:
    """``wrap(make(env_id))`` with :class:`GameScore` under the wrappers and :class:`FullGame` over them (its
    rewards the env's own); an Atari game with sticky actions (unless ``make_kwargs`` sets them)."""
    env = make(env_id, **make_kwargs)
    if is_atari(env) and "repeat_action_probability" not in make_kwargs:
        env.close()
        env = make(env_id, repeat_action_probability=STICKY_ACTIONS, **make_kwargs)
    return FullGame(wrap(GameScore(env)))
