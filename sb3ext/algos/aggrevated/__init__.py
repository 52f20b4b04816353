from sb3ext.algos.aggrevated.aggrevated import AggreVaTeD
from sb3ext.algos.aggrevated.dagger import MatchedDAgger
from sb3ext.algos.aggrevated.policies import CnnPolicy, MlpPolicy

__all__ = ["AggreVaTeD", "CnnPolicy", "MatchedDAgger", "MlpPolicy"]
