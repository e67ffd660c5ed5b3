"""Profiles: diffing stack samples between two cohorts (docs/profiles.md).

samples.py       one cohort out of the store: per profile and function, self and total
significance.py  is a change of share more than the noise between profiles
paths.py         call paths, callees and the merged call tree
diff.py          profile-diff itself: findings and the result
"""

from rootsift.analysis.profiles.diff import FunctionChange, ProfileDiff, profile_diff

__all__ = ["FunctionChange", "ProfileDiff", "profile_diff"]
