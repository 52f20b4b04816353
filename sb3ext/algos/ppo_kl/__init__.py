from sb3ext.algos.ppo_kl.policies import CnnPolicy, MlpPolicy
from sb3ext.algos.ppo_kl.ppo_kl import KLPPO, adapt_kl_coef

__all__ = ["KLPPO", "CnnPolicy", "MlpPolicy", "adapt_kl_coef"]
