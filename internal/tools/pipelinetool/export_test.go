package pipelinetool

// What the tests of package pipelinetool_test, which run the kinds
// through tools.Registry (it imports this package), use of its insides.
var (
	CompositeSpec = compositeSpec
	BuildPipeline = buildPipeline
	FileName      = fileName
)

type PipelineConfig = pipelineConfig

const MaxFileName = maxFileName
