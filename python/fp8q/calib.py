"""fp8q.calib: calibration of static FP8 scales.

MaxCalibrator (running amax: per tensor or channel, windowed like
TransformerEngine's delayed scaling, or a moving average like optimum-quanto)
and HistogramCalibrator (percentile, entropy and MSE amax searches over a
histogram of |x|) are C types; scale_from_amax turns an amax into the
dequantization scale quantize would use; CalibrationCache keeps named
results in a portable, checksummed file. docs/calibration.md has the exact
definitions and how to combine statistics across processes.
"""
from fp8q._C import _HistogramCalibrator as HistogramCalibrator
from fp8q._C import _MaxCalibrator as MaxCalibrator
from fp8q._C import _scale_from_amax as scale_from_amax
from fp8q._calibration_cache import (CalibrationCache,
                                     CalibrationCacheWarning,
                                     CalibrationEntry)

__all__ = ["CalibrationCache", "CalibrationCacheWarning", "CalibrationEntry",
           "HistogramCalibrator", "MaxCalibrator", "scale_from_amax"]
