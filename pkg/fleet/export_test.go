package fleet

// ModelsWith and ModelOptions let the external tests build the main-model callers
// the chat role builds, to watch one call without a whole fleet.
var ModelsWith = modelsOf

type ModelOptions = modelOptions
