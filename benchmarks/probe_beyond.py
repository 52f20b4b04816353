"""Probe of issue 78, not a stage yet: off-policy improvement after AggreVaTeD on BipedalWalkerHardcore-v3.

    python -m benchmarks.probe_beyond --out <folder> [--residual 0.2 | --conservative --bc-steps N] ...

Findings, with the commands that made them: docs/algos/aggrevated_history.md ("Past the expert: first stage
probes", 2026-12-06).

1. AggreVaTeD with the Hardcore entry for --imitation env steps (4 envs, VecNormalize), saved.
2. TD3 (SB3) on one env with the learner's frozen observation statistics, whose acting and bootstrapping choose,
   state by state, between its own actor and the frozen imitation policy by the critic's value (IBRL, Hu et al.
   2023); during warm-up the imitation policy acts (with the exploration noise), not a uniform policy.
3. Every --eval-every env steps: 30 seeded episodes (50,000+) of the greedy choice, and of the actor alone.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
import yaml
from stable_baselines3 import TD3
from stable_baselines3.common.buffers import NStepReplayBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.utils import LinearSchedule, polyak_update
from stable_baselines3.common.vec_env import VecNormalize
from torch.nn import functional as F

from sb3ext.algos.aggrevated import AggreVaTeD
from sb3ext.common.resources import hyperparams_path

ENV = "BipedalWalkerHardcore-v3"
EXPERT = "/work/shared/experts/ppo/BipedalWalkerHardcore-v3_1"


class IBRL(TD3):
    prior_policy = None  # set after construction
    conservative = False  # the actor's action wins only where every critic rates it above every critic's prior action
    bc_steps = 0  # at the first update: the actor cloned onto the prior on the buffer's states
    critic_steps = 0  # then the critics fitted to the prior's own values (its actions as the next actions)
    residual = 0.0  # > 0: the executed action is clip(prior + residual * actor): a bounded correction of the prior

    def act(self, obs: th.Tensor, actor: Any) -> th.Tensor:
        """The residual policy's action (``actor``: the actor or its target network)."""
        return (self.prior_actions(obs) + self.residual * actor(obs)).clamp(-1, 1)

    def prior_actions(self, obs: th.Tensor) -> th.Tensor:
        with th.no_grad():
            return self.prior_policy.get_distribution(obs).mode().clamp(-1, 1)

    def choose(self, obs: th.Tensor, rl: th.Tensor, target: bool = False) -> tuple[th.Tensor, th.Tensor]:
        """Per state, the action of (rl, prior) with the larger min-Q; and the mask of states where the prior won."""
        il = self.prior_actions(obs)
        critic = self.critic_target if target else self.critic
        with th.no_grad():
            q_rl = th.min(th.cat(critic(obs, rl), dim=1), dim=1).values
            q_il = th.cat(critic(obs, il), dim=1)
            q_il = q_il.max(dim=1).values if self.conservative else q_il.min(dim=1).values
        prior_wins = q_il >= q_rl
        return th.where(prior_wins[:, None], il, rl), prior_wins

    def _sample_action(self, learning_starts, action_noise=None, n_envs=1):
        obs = th.as_tensor(self._last_obs, dtype=th.float32)
        with th.no_grad():
            rl = self.actor(obs)
        if self.residual > 0:
            with th.no_grad():
                chosen = self.prior_actions(obs) if self.num_timesteps < learning_starts else self.act(obs, self.actor)
            wins = th.ones(len(obs), dtype=th.bool)
        elif self.num_timesteps < learning_starts:
            chosen, wins = self.prior_actions(obs), th.ones(len(obs), dtype=th.bool)
        else:
            chosen, wins = self.choose(obs, rl)
        self.prior_share.append(float(wins.float().mean()))
        scaled = chosen.numpy()
        if action_noise is not None:
            scaled = np.clip(scaled + action_noise(), -1, 1)
        return self.policy.unscale_action(scaled), scaled

    def warm_start(self, batch_size: int) -> None:
        """The actor cloned onto the prior's actions, then the critics fitted to the prior's values, on the buffer."""
        for _ in range(self.bc_steps):
            obs = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env).observations
            loss = F.mse_loss(self.actor(obs), self.prior_actions(obs).clamp(-0.99, 0.99))
            self.actor.optimizer.zero_grad()
            loss.backward()
            self.actor.optimizer.step()
        self.actor_target.load_state_dict(self.actor.state_dict())
        for step in range(self.critic_steps):
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            with th.no_grad():
                nq = th.min(
                    th.cat(self.critic_target(data.next_observations, self.prior_actions(data.next_observations)), dim=1),
                    dim=1,
                    keepdim=True,
                ).values
                target = data.rewards + (1 - data.dones) * self.gamma * nq
            loss = sum(F.mse_loss(q, target) for q in self.critic(data.observations, data.actions))
            self.critic.optimizer.zero_grad()
            loss.backward()
            self.critic.optimizer.step()
            if step % self.policy_delay == 0:
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
        self.warm_log = {"bc_loss": float(loss.item()) if self.critic_steps == 0 else None}

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self._n_updates == 0 and (self.bc_steps or self.critic_steps):
            self.warm_start(batch_size)
        self.policy.set_training_mode(True)
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])
        for _ in range(gradient_steps):
            self._n_updates += 1
            replay_data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma
            with th.no_grad():
                noise = replay_data.actions.clone().data.normal_(0, self.target_policy_noise)
                noise = noise.clamp(-self.target_noise_clip, self.target_noise_clip)
                if self.residual > 0:
                    next_actions = (self.act(replay_data.next_observations, self.actor_target) + noise).clamp(-1, 1)
                else:
                    next_rl = (self.actor_target(replay_data.next_observations) + noise).clamp(-1, 1)
                    next_actions, _ = self.choose(replay_data.next_observations, next_rl, target=True)  # IBRL
                next_q_values = th.cat(self.critic_target(replay_data.next_observations, next_actions), dim=1)
                next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
                target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values
            current_q_values = self.critic(replay_data.observations, replay_data.actions)
            critic_loss = sum(F.mse_loss(current_q, target_q_values) for current_q in current_q_values)
            self.critic.optimizer.zero_grad()
            critic_loss.backward()
            self.critic.optimizer.step()
            if self._n_updates % self.policy_delay == 0:
                pi = (
                    self.act(replay_data.observations, self.actor)
                    if self.residual > 0
                    else self.actor(replay_data.observations)
                )
                actor_loss = -self.critic.q1_forward(replay_data.observations, pi).mean()
                self.actor.optimizer.zero_grad()
                actor_loss.backward()
                self.actor.optimizer.step()
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                polyak_update(self.actor.parameters(), self.actor_target.parameters(), self.tau)


class AWAC(TD3):
    """The imitation policy itself, improved by advantage-weighted regression on its own replay (AWAC, Nair et al.
    2020): it moves only toward actions it took whose critic advantage is positive, never along the critic's action
    gradient. The critics evaluate it (next actions sampled from it); the TD3 actor is unused."""

    prior_policy = None  # the imitation policy: a copy is improved, the original kept for the warm-up
    critic_steps = 0  # at the first update: the critics fitted to the policy's values on the warm-up buffer
    expert = None  # HuRL (Cheng et al. 2021): the critics bootstrap on lam * V*(s') + (1 - lam) * Q(s', a')
    hurl = 0.0  # lam at the stage's start, decaying linearly to 0 over hurl_updates critic updates
    hurl_updates = 1
    temperature = 0.0  # 0: weight 1 where the advantage is positive (CRR's binary filter); > 0: exp(A / (t·mean|A|))
    actor_lr = 1e-4
    unclipped = False  # the buffer keeps the Gaussian's own samples (the env gets them clipped): no pull inward
    anchor = 0.0  # > 0: plus anchor * KL(prior || policy) on the batch's states: a pull back to the imitation policy
    control = False  # weights drawn at random at the filter's own rate: what the machinery does without the critic

    def setup_awac(self) -> None:
        import copy

        self.pi = copy.deepcopy(self.prior_policy)
        self.pi.set_training_mode(False)
        params = [p for n, p in self.pi.named_parameters() if not n.startswith(("value_net", "mlp_extractor.value_net"))]
        self.pi_optimizer = th.optim.Adam(params, lr=self.actor_lr)
        self.awac_log = []

    def _sample_action(self, learning_starts, action_noise=None, n_envs=1):
        obs = th.as_tensor(self._last_obs, dtype=th.float32)
        with th.no_grad():
            sample = self.pi.get_distribution(obs).sample()
        self.prior_share.append(1.0)
        clipped = sample.clamp(-1, 1).numpy()
        return self.policy.unscale_action(clipped), sample.numpy() if self.unclipped else clipped

    def fit_critics(self, steps: int, batch_size: int) -> None:
        for step in range(steps):
            self.critic_update(self.sample(batch_size))
            if step % self.policy_delay == 0:
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)

    def lam(self) -> float:
        return self.hurl * max(0.0, 1.0 - self._n_updates / self.hurl_updates)

    def sample(self, batch_size: int):
        """A batch with the learner's view of the observations; with HuRL, the rewards on the expert's scale and
        V*(s') in ``self.next_v``."""
        if not self.hurl:
            return self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
        raw = self.replay_buffer.sample(batch_size, env=None)
        venv = self._vec_normalize_env
        with th.no_grad():
            self.next_v = self.expert.value(self.expert.obs_tensor(raw.next_observations.numpy()))[:, None]
        return raw._replace(
            observations=th.as_tensor(venv.normalize_obs(raw.observations.numpy())),
            next_observations=th.as_tensor(venv.normalize_obs(raw.next_observations.numpy())),
            rewards=th.as_tensor(self.expert.normalize_reward(raw.rewards.numpy())),
        )

    def critic_update(self, data) -> float:
        with th.no_grad():
            next_a = self.pi.get_distribution(data.next_observations).sample()
            next_a = next_a if self.unclipped else next_a.clamp(-1, 1)
            nq = th.min(th.cat(self.critic_target(data.next_observations, next_a), dim=1), dim=1, keepdim=True).values
            lam = self.lam()
            if lam > 0:
                nq = lam * self.next_v + (1 - lam) * nq
            discounts = data.discounts if data.discounts is not None else self.gamma  # n-step returns
            target = data.rewards + (1 - data.dones) * discounts * nq
        loss = sum(F.mse_loss(q, target) for q in self.critic(data.observations, data.actions))
        self.critic.optimizer.zero_grad()
        loss.backward()
        self.critic.optimizer.step()
        return float(loss.item())

    def actor_update(self, data) -> None:
        with th.no_grad():
            q = th.min(th.cat(self.critic(data.observations, data.actions), dim=1), dim=1).values
            mode = self.pi.get_distribution(data.observations).mode()
            mode = mode if self.unclipped else mode.clamp(-1, 1)
            v = th.min(th.cat(self.critic(data.observations, mode), dim=1), dim=1).values
            adv = q - v
            if self.temperature > 0:
                w = th.exp((adv / (self.temperature * adv.abs().mean() + 1e-8)).clamp(max=np.log(20.0)))
            else:
                w = (adv > 0).float()
            if self.control:
                w = (th.rand_like(w) < w.mean()).float()
        dist = self.pi.get_distribution(data.observations)
        loss = -(w * dist.log_prob(data.actions)).mean()
        if self.anchor > 0:
            with th.no_grad():
                prior = self.prior_policy.get_distribution(data.observations).distribution
            loss = loss + self.anchor * th.distributions.kl_divergence(prior, dist.distribution).sum(-1).mean()
        self.pi_optimizer.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(self.pi.parameters(), 0.5)
        self.pi_optimizer.step()
        self.awac_log.append((float(w.mean()), float(adv.mean()), float(adv.std())))

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self._n_updates == 0 and self.critic_steps:
            self.fit_critics(self.critic_steps, batch_size)
        for _ in range(gradient_steps):
            self._n_updates += 1
            data = self.sample(batch_size)
            self.critic_update(data)
            if self._n_updates % self.policy_delay == 0:
                self.actor_update(data)
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)


def evaluate(model: IBRL, stats, episodes: int, seed: int, mode: str) -> list[float]:
    import gymnasium as gym

    env = gym.make(ENV)
    returns, magnitudes = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            o = th.as_tensor(np.clip((obs - stats.mean) / np.sqrt(stats.var + 1e-8), -10, 10)[None], dtype=th.float32)
            with th.no_grad():
                if mode == "awac":
                    a = model.pi.get_distribution(o).mode().clamp(-1, 1)
                elif mode == "prior":
                    a = model.prior_actions(o)
                elif mode == "actor":
                    a = model.act(o, model.actor) if model.residual > 0 else model.actor(o)
                else:
                    a, _ = model.choose(o, model.actor(o))
            obs, r, term, trunc, _ = env.step(a.numpy()[0])
            magnitudes.append(float(a.abs().mean()))
            total += r
            done = term or trunc
        returns.append(total)
    model.action_magnitude = float(np.mean(magnitudes))  # the mean |torque| played: a myopic critic lowers it
    return returns


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--imitation", type=int, default=50_000)
    p.add_argument("--stage", type=int, default=150_000)
    p.add_argument("--eval-every", type=int, default=25_000)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--net", type=int, default=256)
    p.add_argument("--learning-starts", type=int, default=10_000)
    p.add_argument("--bc-steps", type=int, default=0)
    p.add_argument("--critic-steps", type=int, default=0)
    p.add_argument("--conservative", action="store_true")
    p.add_argument("--residual", type=float, default=0.0)
    p.add_argument("--awac", action="store_true")
    p.add_argument("--unclipped", action="store_true")
    p.add_argument("--control", action="store_true")
    p.add_argument("--anchor", type=float, default=0.0)
    p.add_argument("--n-step", type=int, default=1)
    p.add_argument("--hurl", type=float, default=0.0)
    p.add_argument("--hurl-updates", type=int, default=100_000)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--actor-lr", type=float, default=1e-4)
    p.add_argument("--train-freq", type=int, default=1)
    a = p.parse_args()
    th.set_num_threads(1)
    a.out.mkdir(parents=True, exist_ok=True)
    log = open(a.out / "log.jsonl", "a")
    learner_path = a.out / "aggrevated.zip"
    entry = yaml.safe_load(hyperparams_path("aggrevated").read_text())[ENV]
    if not learner_path.exists():
        t = time.process_time()
        env = VecNormalize(make_vec_env(ENV, n_envs=entry["n_envs"], seed=a.seed), norm_reward=False)
        kw = {
            k: v
            for k, v in entry.items()
            if k not in ("expert", "normalize", "n_envs", "n_timesteps", "policy", "policy_kwargs", "learning_rate")
        }
        lr = float(str(entry["learning_rate"]).removeprefix("lin_"))
        model = AggreVaTeD(
            "MlpPolicy",
            env,
            expert=EXPERT,
            seed=a.seed,
            policy_kwargs=dict(net_arch=[256, 256], log_std_init=-1.0),
            learning_rate=LinearSchedule(lr, 0.0, 1.0),
            **kw,
        )
        model.learn(a.imitation)
        model.save(learner_path)
        env.save(str(a.out / "vecnormalize.pkl"))
        print(json.dumps({"stage": "imitation", "steps": a.imitation, "cpu_s": time.process_time() - t}), file=log, flush=True)
    learner = AggreVaTeD.load(learner_path)
    venv = VecNormalize.load(str(a.out / "vecnormalize.pkl"), make_vec_env(ENV, n_envs=1, seed=a.seed + 100))
    venv.training = False  # the prior's view stays as it was trained
    stats = venv.obs_rms
    n = a.net
    model = (AWAC if a.awac else IBRL)(
        "MlpPolicy",
        venv,
        policy_kwargs=dict(net_arch=[n, n]),
        learning_starts=a.learning_starts,
        buffer_size=1_000_000,
        batch_size=256,
        seed=a.seed,
        action_noise=None if a.awac else NormalActionNoise(np.zeros(4), 0.1 * np.ones(4)),
        train_freq=a.train_freq,
        replay_buffer_class=NStepReplayBuffer if a.n_step > 1 else None,
        replay_buffer_kwargs=dict(n_steps=a.n_step, gamma=0.99) if a.n_step > 1 else None,
        device="cpu",
        verbose=0,
    )
    model.prior_policy = learner.policy
    model.prior_share = []
    model.bc_steps, model.critic_steps, model.conservative = a.bc_steps, a.critic_steps, a.conservative
    model.residual = a.residual
    if a.awac:
        model.temperature, model.actor_lr = a.temperature, a.actor_lr
        model.hurl, model.hurl_updates = a.hurl, a.hurl_updates
        model.unclipped, model.control, model.anchor = a.unclipped, a.control, a.anchor
        if a.hurl:
            from sb3ext.experts import load_expert

            model.expert = load_expert(EXPERT, ENV)
            model.gamma = model.expert.gamma
        model.setup_awac()
    if a.residual > 0:  # the correction starts at zero: the residual policy is the prior
        with th.no_grad():
            for net in (model.actor, model.actor_target):
                last = [m for m in net.mu if isinstance(m, th.nn.Linear)][-1]
                last.weight.mul_(0.0)
                last.bias.mul_(0.0)
    r = evaluate(model, stats, a.episodes, 50_000, "awac" if a.awac else "prior")
    print(
        json.dumps({"stage": "ibrl", "steps": 0, "prior": float(np.mean(r)), "prior_se": float(np.std(r) / np.sqrt(len(r)))}),
        file=log,
        flush=True,
    )
    done = 0
    t = time.process_time()
    while done < a.stage:
        model.learn(a.eval_every, reset_num_timesteps=False)
        done += a.eval_every
        cpu = time.process_time() - t
        actor = evaluate(model, stats, a.episodes, 50_000, "awac" if a.awac else "actor")
        greedy = actor if model.residual > 0 or a.awac else evaluate(model, stats, a.episodes, 50_000, "greedy")
        share = float(np.mean(model.prior_share[-a.eval_every :]))
        print(
            json.dumps(
                {
                    "stage": "ibrl",
                    "steps": done,
                    "greedy": float(np.mean(greedy)),
                    "greedy_se": float(np.std(greedy) / np.sqrt(len(greedy))),
                    "actor": float(np.mean(actor)),
                    "prior_share": share,
                    "train_cpu_s": cpu,
                    "lam": model.lam() if a.awac else None,
                    "action_magnitude": model.action_magnitude,
                    "awac": np.mean(model.awac_log[-1000:], axis=0).tolist() if a.awac and model.awac_log else None,
                }
            ),
            file=log,
            flush=True,
        )
        t = time.process_time()
        model.save(a.out / f"ibrl_{done}.zip")


if __name__ == "__main__":
    main()
