// Handler classes and interceptors: constructor arguments and option types, the retry
// callback's parameters inferred from context.
import { expectAssignable, expectError, expectNotAssignable, expectType } from 'tsd'
import { Client, DecoratorHandler, type Dispatcher, RedirectHandler, RetryHandler, interceptors } from '../../ts/index'

const client = new Client('http://localhost')
const dispatch: Dispatcher.Dispatch = client.dispatch.bind(client)
const handler: Dispatcher.DispatchHandler = {}
const opts: Dispatcher.DispatchOptions = { path: '/', method: 'GET' }

// RetryHandler
const retryHandler = new RetryHandler(
  {
    ...opts,
    retryOptions: {
      retry(err, context, callback) {
        expectType<Error>(err)
        expectType<number>(context.state.counter)
        expectAssignable<Dispatcher.DispatchOptions>(context.opts)
        expectType<RetryHandler.RetryOptions | undefined>(context.opts.retryOptions)
        callback(null)
        callback(err)
        callback()
      },
      maxRetries: 5,
      maxTimeout: 30e3,
      minTimeout: 500,
      timeoutFactor: 2,
      retryAfter: true,
      methods: ['GET', 'PUT'],
      statusCodes: [500, 502],
      errorCodes: ['ECONNRESET'],
      throwOnError: false,
    },
  },
  { dispatch, handler },
)
expectAssignable<Dispatcher.DispatchHandler>(retryHandler)
expectAssignable<RetryHandler.RetryOptions>({ maxRetries: 1 })
expectAssignable<RetryHandler.RetryState>({ counter: 1 })
expectAssignable<RetryHandler.RetryHandlers>({ dispatch, handler })
expectAssignable<RetryHandler.RetryCallback>((err, context, callback) => {
  expectType<Error>(err)
  expectType<RetryHandler.RetryState>(context.state)
  callback(null)
})
expectAssignable<RetryHandler.OnRetryCallback>((result) => void result)
expectError(new RetryHandler(opts, { dispatch }))
expectError(new RetryHandler({ ...opts, retryOptions: { maxRetries: '5' } }, { dispatch, handler }))

// RedirectHandler and DecoratorHandler
expectAssignable<Dispatcher.DispatchHandler>(new RedirectHandler(dispatch, 2, opts, handler))
expectError(new RedirectHandler(dispatch, '2', opts, handler))
const decorated = new DecoratorHandler(handler)
expectAssignable<Dispatcher.DispatchHandler>(decorated)
class Logging extends DecoratorHandler {
  override onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    super.onResponseStart(controller, statusCode, headers, statusMessage)
  }
}
expectAssignable<Dispatcher.DispatchHandler>(new Logging(handler))
expectError(new DecoratorHandler())

// Interceptors
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.redirect({ maxRedirections: 3 }))
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.redirect())
expectType<Dispatcher.DispatcherComposeInterceptor>(
  interceptors.retry({ maxRetries: 1, retry: (err, ctx, cb) => void [err, ctx.state.counter, cb()] }),
)
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.dump({ maxSize: 1024 }))
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.responseError())
expectType<Dispatcher.DispatcherComposeInterceptor>(interceptors.responseError({ throwOnError: true }))
expectError(interceptors.responseError({ throwOnError: 'yes' }))
expectError(interceptors.dump({ maxSize: '1kb' }))
expectError(interceptors.redirect({ maxRedirections: 'three' }))
expectAssignable<Dispatcher>(
  client.compose(interceptors.redirect(), interceptors.retry(), interceptors.dump(), interceptors.responseError()),
)

// Their option types, under undici's names.
expectAssignable<interceptors.DumpInterceptorOpts>({ maxSize: 1 })
expectAssignable<interceptors.RetryInterceptorOpts>({ maxRetries: 1, statusCodes: [503] })
expectAssignable<interceptors.RedirectInterceptorOpts>({ maxRedirections: 1 })
expectAssignable<interceptors.ResponseErrorInterceptorOpts>({ throwOnError: true })
expectNotAssignable<interceptors.DumpInterceptorOpts>({ maxSize: 'big' })
