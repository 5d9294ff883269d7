"""The model side: what every stage knows about a trained model and its data, below the stages.

- :mod:`.mlmodel`: a downloaded ``MLmodel`` file and the names its tensors get in Triton;
- :mod:`.dtypes`: data types between numpy, MLflow signatures, ONNX and Triton;
- :mod:`.roles`: output roles (class scores, label, prediction) and what counts as a label;
- :mod:`.native`: the native model, the reference every converted model is compared with;
- :mod:`.golden`: the golden set every gate replays, streamed and checked against the signature;
- :mod:`.parity`: output parity between a reference and a candidate (export, TensorRT, canary);
- :mod:`.metrics`: quality metrics on ground truth;
- :mod:`.skops_import`: importing MLflow's sklearn format without importing PyTorch.

Nothing is imported here: stages import the module they need.
"""
