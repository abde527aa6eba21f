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

// classes gives each class its name and the NVML code that means it.
var classes = [...]struct {
	name string
	ret  nvml.Return
}{
	ClassOK:               {"ok", nvml.SUCCESS},
	ClassNotSupported:     {"not supported", nvml.ERROR_NOT_SUPPORTED},
	ClassNoPermission:     {"no permission", nvml.ERROR_NO_PERMISSION},
	ClassFunctionNotFound: {"function not found", nvml.ERROR_FUNCTION_NOT_FOUND},
	ClassVersionMismatch:  {"struct version not supported", nvml.ERROR_ARGUMENT_VERSION_MISMATCH},
	ClassGPULost:          {"gpu lost", nvml.ERROR_GPU_IS_LOST},
	ClassTimeout:          {"timeout", nvml.ERROR_TIMEOUT},
	ClassOther:            {name: "error"}, // any code not listed above
}

func (c Class) String() string { return classes[min(c, ClassOther)].name }

// Classify maps an NVML return code to its class.
func Classify(ret nvml.Return) Class {
	for c := range ClassOther {
		if classes[c].ret == ret {
			return c
		}
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
