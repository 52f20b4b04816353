"""Probe of issue 78, not a stage yet: SAC kickstarted from an AggreVaTeD learner, against the same SAC from scratch.

    python -m benchmarks.probe_kickstart --env LunarLanderContinuous-v3 --expert a2c/LunarLanderContinuous-v2_1 \
        --out <folder> --imitation 20000 --budget 200000 [--scratch] [--anchor 1.0]

1. Unless ``--scratch``: ``python -m rl_zoo3.train --algo aggrevated`` with the env's entry for ``--imitation`` env
   steps (the zoo's own command); its learner, with its frozen observation statistics, is the prior.
2. SAC (SB3; 256-256, an update every ``--train-freq`` env steps) on the raw env for the rest of ``--budget``. With
   a prior: the prior plays the warm-up (its own Gaussian samples); the actor is cloned onto it on the buffer's
   states; its loss is SAC's plus ``lam * mean|Q| * |tanh(mu) - prior|^2`` (TD3+BC's scale), lam = ``--anchor``
   times the return shortfall of the last 10 training episodes on a normalised score (QDagger's rule; 0 for a
   random policy's return, 1 for the prior's warm-up episodes). From scratch: SAC's own uniform warm-up.

Measured and removed (docs/algos/aggrevated_history.md, 2026-12-06, third; the code at commit 1ee9e97): lam decaying
linearly over a number of env steps; the learner's own Gaussian as the actor instead of a clone.
3. Every ``--eval-every`` env steps: the actor's deterministic return on 30 seeded episodes (50,000+), CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3 import SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.common.vec_env import VecNormalize
from torch.nn import functional as F

from benchmarks.suite import experts_folder
from sb3ext.algos.aggrevated import AggreVaTeD


class Kickstarted(SAC):
    prior = None  # (raw observations) -> (actions in [-1, 1], sampled actions): the imitation learner
    anchor = 0.0
    bc_steps = 0
    gate: tuple[float, float | None] = (0.0, None)  # (a random policy's return, the prior's)

    def lam(self) -> float:
        """``anchor`` times the return shortfall of the last 10 training episodes (QDagger's rule, normalised)."""
        if self.num_timesteps < self.learning_starts or len(self.ep_info_buffer) == 0:
            return self.anchor
        low, high = self.gate
        if high is None:  # the prior's own (sampled) episodes of the warm-up
            high = float(np.mean([ep["r"] for ep in self.ep_info_buffer]))
            self.gate = (low, high)
        recent = float(np.mean([ep["r"] for ep in list(self.ep_info_buffer)[-10:]]))
        return self.anchor * float(np.clip(1.0 - (recent - low) / (high - low), 0.0, 1.0))

    def _sample_action(self, learning_starts, action_noise=None, n_envs=1):
        if self.prior is None or self.num_timesteps >= learning_starts:
            return super()._sample_action(learning_starts, action_noise, n_envs)
        _, sampled = self.prior(th.as_tensor(self._last_obs, dtype=th.float32))
        scaled = sampled.numpy()
        return self.policy.unscale_action(scaled), scaled

    def clone(self, batch_size: int) -> None:
        for _ in range(self.bc_steps):
            obs = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env).observations
            target, _ = self.prior(obs)
            loss = F.mse_loss(self.actor(obs, deterministic=True), target.clamp(-0.97, 0.97))
            self.actor.optimizer.zero_grad()
            loss.backward()
            self.actor.optimizer.step()
        self.bc_loss = float(loss.item()) if self.bc_steps else None

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        if self._n_updates == 0 and self.prior is not None:
            self.clone(batch_size)
        self.policy.set_training_mode(True)
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer, self.ent_coef_optimizer])
        lam = self.lam() if self.prior is not None else 0.0
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            actions_pi, log_prob = self.actor.action_log_prob(data.observations)
            log_prob = log_prob.reshape(-1, 1)
            ent_coef_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
            ent_coef = th.exp(self.log_ent_coef.detach())
            self.ent_coef_optimizer.zero_grad()
            ent_coef_loss.backward()
            self.ent_coef_optimizer.step()
            with th.no_grad():
                next_actions, next_log_prob = self.actor.action_log_prob(data.next_observations)
                next_q = th.cat(self.critic_target(data.next_observations, next_actions), dim=1)
                next_q = th.min(next_q, dim=1, keepdim=True).values
                next_q = next_q - ent_coef * next_log_prob.reshape(-1, 1)
                target = data.rewards + (1 - data.dones) * self.gamma * next_q
            critic_loss = 0.5 * sum(F.mse_loss(q, target) for q in self.critic(data.observations, data.actions))
            self.critic.optimizer.zero_grad()
            critic_loss.backward()
            self.critic.optimizer.step()
            q_pi = th.min(th.cat(self.critic(data.observations, actions_pi), dim=1), dim=1, keepdim=True).values
            actor_loss = (ent_coef * log_prob - q_pi).mean()
            if lam > 0:
                prior, _ = self.prior(data.observations)
                bc = ((self.actor(data.observations, deterministic=True) - prior) ** 2).sum(-1).mean()
                actor_loss = actor_loss + lam * q_pi.abs().mean().detach() * bc
            self.actor.optimizer.zero_grad()
            actor_loss.backward()
            self.actor.optimizer.step()
            if self._n_updates % self.target_update_interval == 0:
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                polyak_update(self.batch_norm_stats, self.batch_norm_stats_target, 1.0)


def imitate(env_id: str, expert: str, steps: int, seed: int, out: Path):
    """The zoo's own command for AggreVaTeD; returns the prior: raw obs -> (mode, sample), both clipped to [-1, 1]."""
    folder = out / "imitation"
    model_path = folder / "aggrevated" / f"{env_id}_1" / f"{env_id}.zip"
    if not model_path.exists():
        shared = experts_folder() / expert
        reference = str(shared) if shared.is_dir() else expert
        command = [
            sys.executable, "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", env_id, "--seed", str(seed),
            "-n", str(steps), "--eval-freq", "-1", "-f", str(folder), "--num-threads", "1", "--device", "cpu",
            "--log-interval", "-2", "--hyperparams", f"expert:'{reference}'",
        ]  # fmt: skip
        subprocess.run(command, check=True)
    learner = AggreVaTeD.load(model_path, device="cpu")
    stats_path = model_path.parent / env_id / "vecnormalize.pkl"
    venv = VecNormalize.load(str(stats_path), make_vec_env(env_id, n_envs=1)) if stats_path.exists() else None

    def prior(obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        if venv is not None:
            obs = th.as_tensor(venv.normalize_obs(obs.numpy()), dtype=th.float32)
        with th.no_grad():
            dist = learner.policy.get_distribution(obs)
            return dist.mode().clamp(-1, 1), dist.sample().clamp(-1, 1)

    return prior


def evaluate(act, env_id: str, episodes: int) -> list[float]:
    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=50_000 + i)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(act(obs))
            total += float(r)
            done = term or trunc
        returns.append(total)
    return returns


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", required=True)
    p.add_argument("--expert", default=None)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--imitation", type=int, default=20_000)
    p.add_argument("--budget", type=int, default=200_000)
    p.add_argument("--scratch", action="store_true")
    p.add_argument("--anchor", type=float, default=1.0)
    p.add_argument("--bc-steps", type=int, default=5_000)
    p.add_argument("--learning-starts", type=int, default=10_000)
    p.add_argument("--train-freq", type=int, default=4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--ent-coef", default="auto_0.1")
    p.add_argument("--eval-every", type=int, default=20_000)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    th.set_num_threads(1)
    a.out.mkdir(parents=True, exist_ok=True)
    log = open(a.out / "log.jsonl", "a")

    def record(**row) -> None:
        print(json.dumps(row), file=log, flush=True)
        print(json.dumps(row), flush=True)

    used = 0
    prior = None
    if not a.scratch:
        t = time.process_time()
        prior = imitate(a.env, a.expert, a.imitation, a.seed, a.out)
        used = a.imitation
        r = evaluate(lambda o: prior(th.as_tensor(o[None], dtype=th.float32))[0].numpy()[0], a.env, a.episodes)
        record(stage="imitation", steps=used, mean=float(np.mean(r)), se=float(np.std(r) / np.sqrt(len(r))))
    model = Kickstarted(
        "MlpPolicy", make_vec_env(a.env, n_envs=1, seed=a.seed), learning_starts=a.learning_starts, batch_size=256,
        train_freq=a.train_freq, gradient_steps=1, gamma=a.gamma, ent_coef=a.ent_coef, seed=a.seed, device="cpu", verbose=0,
    )  # fmt: skip
    model.prior, model.anchor, model.bc_steps = prior, a.anchor, a.bc_steps
    if prior is not None:
        rng = np.random.default_rng(a.seed)
        space = gym.make(a.env).action_space
        low = float(np.mean(evaluate(lambda o: rng.uniform(space.low, space.high), a.env, 10)))
        model.gate = (low, None)
        record(stage="gate", random=low)

    def act(o: np.ndarray) -> np.ndarray:
        return model.predict(o, deterministic=True)[0]

    while used < a.budget:
        t = time.process_time()
        chunk = min(a.eval_every, a.budget - used)
        model.learn(chunk, reset_num_timesteps=False)
        used += chunk
        cpu = time.process_time() - t
        r = evaluate(act, a.env, a.episodes)
        record(
            stage="scratch" if a.scratch else "kickstart", steps=used, mean=float(np.mean(r)),
            se=float(np.std(r) / np.sqrt(len(r))), train_cpu_s=cpu, lam=model.lam() if prior else 0.0,
            ent_coef=float(th.exp(model.log_ent_coef).item()), bc_loss=getattr(model, "bc_loss", None), gate=model.gate,
        )  # fmt: skip
        model.save(a.out / "sac.zip")


if __name__ == "__main__":
    main()
