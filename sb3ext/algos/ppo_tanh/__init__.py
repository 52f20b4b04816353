from sb3ext.algos.ppo_tanh.policies import CnnPolicy, MlpPolicy, TanhActorCriticPolicy
from sb3ext.algos.ppo_tanh.ppo_tanh import TanhPPO

__all__ = ["CnnPolicy", "MlpPolicy", "TanhActorCriticPolicy", "TanhPPO"]
