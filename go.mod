module github.com/cuvs-go/cuvs

go 1.25

require (
	github.com/dave/jennifer v1.7.1
	github.com/tj/go-spin v1.1.0
	github.com/x448/float16 v0.8.4
	github.com/xlab/c-for-go v1.3.0
	github.com/xlab/pkgconfig v0.0.0-20170226114623-cea12a0fd245
	golang.org/x/tools v0.1.12
	gopkg.in/yaml.v2 v2.4.0
	modernc.org/cc/v4 v4.34.0
)

require (
	github.com/dlclark/regexp2 v1.11.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	golang.org/x/mod v0.6.0-dev.0.20220419223038-86c51ed26bb4 // indirect
	golang.org/x/sys v0.0.0-20220825204002-c680a09ffe64 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/opt v0.2.0 // indirect
	modernc.org/sortutil v1.2.1 // indirect
	modernc.org/strutil v1.2.1 // indirect
	modernc.org/token v1.1.0 // indirect
)
