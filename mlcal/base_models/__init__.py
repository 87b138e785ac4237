"""What a base model outputs, read the same way for every library.

* :mod:`mlcal.base_models.scores` -- positive-class probabilities, raw margins, score matrices,
  and the refusal of hard labels (scikit-learn, XGBoost, LightGBM, CatBoost);
* :mod:`mlcal.base_models.boosters` -- native XGBoost / LightGBM ``Booster`` objects as binary
  classifiers (:class:`~mlcal.base_models.boosters.BoosterClassifier`).
"""
