package sampler

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Class is the meaning of an NVML result for the logger.
type Class uint8

// Result classes.
const (
	ClassOK               Class = iota
	ClassNotSupported           // the GPU or driver does not offer this reading
	ClassNoPermission           // the reading needs privileges we lack
	ClassFunctionNotFound       // the installed driver lacks the symbol
	ClassVersionMismatch        // the driver does not know the version of the struct asked for
	ClassGPULost                // NVML_ERROR_GPU_IS_LOST: the GPU is gone until reset
	ClassTimeout                // NVML_ERROR_TIMEOUT (event waits)
	ClassOther                  // anything else: a failure worth counting
)

var classNames = [...]string{
	ClassOK:               "ok",
	ClassNotSupported:     "not supported",
	ClassNoPermission:     "no permission",
	ClassFunctionNotFound: "function not found",
	ClassVersionMismatch:  "struct version not supported",
	ClassGPULost:          "gpu lost",
	ClassTimeout:          "timeout",
	ClassOther:            "error",
}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "error"
}

// Classify maps an NVML return code to its class.
func Classify(ret nvml.Return) Class {
	switch ret {
	case nvml.SUCCESS:
		return ClassOK
	case nvml.ERROR_NOT_SUPPORTED:
		return ClassNotSupported
	case nvml.ERROR_NO_PERMISSION:
		return ClassNoPermission
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return ClassFunctionNotFound
	case nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
		return ClassVersionMismatch
	case nvml.ERROR_GPU_IS_LOST:
		return ClassGPULost
	case nvml.ERROR_TIMEOUT:
		return ClassTimeout
	}
	return ClassOther
}

// capability reports whether the class means "not available here", not
// "something broke": cached, re-probed rarely, never a failure.
func (c Class) capability() bool {
	return c == ClassNotSupported || c == ClassNoPermission || c == ClassFunctionNotFound || c == ClassVersionMismatch
}

// retText returns NVML's text for a return code, safe in a CSV cell.
func retText(ret nvml.Return) string {
	return strings.NewReplacer(",", ";", "\"", "'", "\n", " ").Replace(ret.Error())
}
