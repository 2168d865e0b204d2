"""The custom-code config Nemotron Parse ships (trust_remote_code), reduced to what vLLM's model files read:
`decoder` an mBART config (attribute access: config.decoder.d_model, ...), `encoder` the RADIO tower's
patch_size and args (its `model` name, read by nemotron_parse*.py RadioWithNeck), image_size at the top."""

import transformers


class RefConfig(transformers.PretrainedConfig):
    model_type = "nemotron_parse"
    sub_configs = {"encoder": transformers.PretrainedConfig, "decoder": transformers.MBartConfig}

    def __init__(self, encoder=None, decoder=None, image_size=None, navit_packing=False, **kwargs):
        if isinstance(encoder, dict):
            encoder = transformers.PretrainedConfig(**encoder)
        if isinstance(decoder, dict):
            decoder = transformers.MBartConfig(**{k: v for k, v in decoder.items() if k != "model_type"})
        self.encoder = encoder
        self.decoder = decoder
        self.image_size = image_size
        self.navit_packing = navit_packing
        super().__init__(**kwargs)
