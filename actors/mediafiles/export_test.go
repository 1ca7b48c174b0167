package mediafiles

// VideoError is videoError, for the tests.
var VideoError = videoError
